// Fuzzes the disk tier's file reader (kvstate/tier_file.h): any input must
// give one checked block or a status with a message — never a crash, a read
// outside the input, or a block whose hash does not follow from its salt,
// parent and tokens. The context it is checked against is the file's own
// header (so the fuzzer reaches the block), once with its element type and
// once with another (the conversion path); a second check against other
// weights must refuse.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "fuzz/common.h"
#include "kvstate/kv_format.h"
#include "kvstate/tier_file.h"

using namespace llm;  // NOLINT

namespace {

kvstate::ReadFn Reader(const uint8_t* data, size_t size, size_t* at) {
  return [data, size, at, calls = size_t{0}](void* buf, size_t n) mutable -> StatusOr<size_t> {
    const size_t piece = 1 + (calls++ * 7919) % 4093;  // uneven pieces
    const size_t k = std::min({n, size - *at, piece});
    std::memcpy(buf, data + *at, k);
    *at += k;
    return k;
  };
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t at = 0;
  kvstate::StreamReader header_reader(Reader(data, size, &at));
  kvstate::StreamHeader h;
  if (!header_reader.ReadHeader(&h).ok()) return 0;
  if (h.geometry.wire().block_bytes() > (int64_t{4} << 20)) return 0;  // see fuzz_kv_reader
  const int32_t other_elem = h.geometry.elem == LLM_KV_F32 ? int32_t{LLM_KV_Q8_0} : int32_t{LLM_KV_F32};
  // the file's own types, another K type, and K and V apart (V F16)
  const int32_t types[][2] = {{h.geometry.elem, h.geometry.elem_v}, {other_elem, h.geometry.elem_v},
                              {other_elem, LLM_KV_F16}};
  for (const auto& t : types) {
    kvstate::KvGeometry g = h.geometry;
    g.elem = t[0];
    g.elem_v = t[1];
    at = 0;
    kvstate::TierBlock b;
    const Status st = kvstate::ReadTierFile(Reader(data, size, &at), h.model, g, &b);
    LLM_FUZZ_CHECK(at <= size, "read past the input");
    if (!st.ok()) {
      LLM_FUZZ_CHECK(!st.message().empty(), "an error without a message");
      continue;
    }
    LLM_FUZZ_CHECK(h.tier, "a stream without TIER read as a tier file");
    LLM_FUZZ_CHECK(b.hash == BlockPool::HashBlock(b.parent, b.salt, b.tokens), "bad hash accepted");
    LLM_FUZZ_CHECK(static_cast<int64_t>(b.kv.size()) == g.wire().block_bytes(), "block size");
    LLM_FUZZ_CHECK(static_cast<int32_t>(b.tokens.size()) == g.block_size, "token count");
  }
  ModelFingerprint other = h.model;
  other.weights_hash ^= 1;
  at = 0;
  kvstate::TierBlock b;
  const Status st = kvstate::ReadTierFile(Reader(data, size, &at), other, h.geometry, &b);
  LLM_FUZZ_CHECK(!st.ok(), "other weights accepted");
  at = 0;
  const Status hs = kvstate::CheckTierFileHeader(Reader(data, size, &at), h.model, h.geometry);
  LLM_FUZZ_CHECK(hs.ok() == h.tier, "the header check disagrees with the reader");
  return 0;
}
