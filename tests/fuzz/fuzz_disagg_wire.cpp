// Fuzzes the parsers of prefill/decode disaggregation (src/disagg/): the
// transfer descriptor (a string an application passes between processes)
// and the pull protocol's request and reply messages (bytes from a peer).
// Any input must parse to values that format back to what was parsed, or
// give a status with a message — never a crash or a read outside the input.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "disagg/descriptor.h"
#include "fuzz/common.h"
#include "disagg/wire.h"

using namespace llm;  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  StatusOr<disagg::TransferDescriptor> d = disagg::ParseDescriptor(text);
  if (d.ok()) {
    // What parses is canonical: it formats back to the same text.
    LLM_FUZZ_CHECK(disagg::FormatDescriptor(*d) == text, "a parsed descriptor formats back to its text");
    LLM_FUZZ_CHECK(d->port != 0 && d->n_tokens > 0 && d->bytes != 0 && !d->host.empty(), "descriptor ranges");
  } else {
    LLM_FUZZ_CHECK(!d.status().message().empty(), "a refusal has a message");
  }
  if (size >= disagg::kRequestBytes) {
    StatusOr<disagg::Request> r = disagg::DecodeRequest({data, disagg::kRequestBytes});
    if (r.ok()) {
      uint8_t again[disagg::kRequestBytes];
      disagg::EncodeRequest(*r, again);
      for (size_t i = 0; i < disagg::kRequestBytes; ++i)
        LLM_FUZZ_CHECK(again[i] == data[i], "a decoded request encodes back to its bytes");
    }
  }
  if (size >= disagg::kReplyBytes) {
    StatusOr<disagg::Reply> r = disagg::DecodeReply({data + size - disagg::kReplyBytes, disagg::kReplyBytes});
    LLM_FUZZ_CHECK(r.ok() || !r.status().message().empty(), "a refusal has a message");
  }
  return 0;
}
