// Fuzzes the KV stream reader (kvstate/kv_format.h): any input must give a
// clean stream or a status with a message — never a crash, a read outside
// the input, an allocation the input did not pay for, or a block accepted
// whose checksum or hash chain is wrong. Bytes arrive in uneven pieces (as
// a caller's read callback may give them). Accepted blocks go through
// element-type conversions, K and V alike or apart (arbitrary bytes: NaN,
// infinities, huge scales) and a compatibility check against the stream's own header, which
// must pass, and against another model's, which must not.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz/common.h"
#include "kvstate/kv_convert.h"
#include "kvstate/kv_format.h"

using namespace llm;  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t at = 0, calls = 0;
  kvstate::StreamReader reader([&](void* buf, size_t n) -> StatusOr<size_t> {
    const size_t piece = 1 + (calls++ * 7919) % 4093;  // uneven pieces, some of one byte
    const size_t k = std::min({n, size - at, piece});
    std::memcpy(buf, data + at, k);
    at += k;
    return k;
  });
  kvstate::StreamHeader h;
  Status st = reader.ReadHeader(&h);
  if (!st.ok()) {
    LLM_FUZZ_CHECK(!st.message().empty(), "an error without a message");
    return 0;
  }
  LLM_FUZZ_CHECK(static_cast<int32_t>(h.geometry.window.size()) == h.geometry.n_layer, "window per layer");
  LLM_FUZZ_CHECK(kvstate::CheckCompatible(h, h.model, h.geometry).ok(), "a stream incompatible with itself");
  ModelFingerprint other = h.model;
  other.weights_hash ^= 1;
  LLM_FUZZ_CHECK(kvstate::CheckCompatible(h, other, h.geometry).code() == LLM_ERR_KV_MISMATCH, "other weights accepted");

  const KvWireLayout wire = h.geometry.wire();
  // A block this large would be refused by no context the fuzzer can
  // afford; the reader's own bound (kMaxBlockBytes) is checked above.
  if (wire.block_bytes() > (int64_t{4} << 20)) return 0;
  kvstate::BlockRecord rec;
  std::vector<uint8_t> out;
  BlockHash parent = h.first_parent;  // 0 unless a TIER section says otherwise
  for (int blocks = 0; blocks < 64; ++blocks) {
    StatusOr<bool> more = reader.NextBlock(&rec);
    if (!more.ok()) {
      LLM_FUZZ_CHECK(!more.status().message().empty(), "an error without a message");
      return 0;
    }
    if (!*more) break;
    LLM_FUZZ_CHECK(rec.parent == parent && rec.hash == BlockPool::HashBlock(parent, h.salt, rec.tokens), "bad chain accepted");
    LLM_FUZZ_CHECK(static_cast<int64_t>(rec.kv.size()) == wire.block_bytes(), "block size");
    parent = rec.hash;
    // one-type targets and K and V apart (each side converting on its own;
    // Q4_0 and FP8 only where head_dim holds their 32-value blocks). An
    // accepted block's FP8 tiles hold finite scales >= 0 and no NaN code.
    LLM_FUZZ_CHECK(kvstate::CheckKvBlockValues(wire, rec.kv).ok(), "a corrupt FP8 block accepted");
    const bool q4 = wire.head_dim % kQ4Block == 0;
    const int32_t targets[][2] = {{LLM_KV_F32, 0},           {LLM_KV_F16, 0},          {LLM_KV_Q8_0, 0},
                                  {LLM_KV_Q8_0, LLM_KV_F16}, {LLM_KV_F16, LLM_KV_F32}, {LLM_KV_F32, kKvWireQ4_0},
                                  {kKvWireFp8, 0},           {LLM_KV_F16, kKvWireFp8}};
    for (const auto& t : targets) {
      if ((t[1] == kKvWireQ4_0 || t[0] == kKvWireFp8 || t[1] == kKvWireFp8) && !q4) continue;
      KvWireLayout to = wire;
      to.elem = t[0];
      to.elem_v = t[1];
      out.assign(static_cast<size_t>(to.block_bytes()), 0);
      kvstate::ConvertKvBlock(wire, rec.kv, to, out);
    }
  }
  LLM_FUZZ_CHECK(at <= size, "read past the input");
  return 0;
}
