// The transfer descriptor: the one string a producer's final event carries
// and a consumer's request is given (llm_event / llm_request
// .kv_transfer_desc). It names where the KV is, under which lease, and what
// it was computed with, so a consumer can refuse it before connecting:
//
//   llmkv1 addr=<host>:<port> lease=<16 hex> model=<16 hex> geom=<16 hex> tokens=<n> bytes=<n>
//
// host: an IPv4 address or a DNS name ([0-9A-Za-z.-], at most 253 bytes).
// model / geom: ModelDigest / GeometryDigest (identity.h) of the producer.
// tokens: prompt tokens whose KV the lease holds; bytes: the KV stream's
// size. The parser is strict (that order, single spaces, no extra text) and
// bounded: a descriptor is untrusted input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

namespace llm::disagg {

inline constexpr size_t kMaxDescriptorBytes = 512;
inline constexpr uint64_t kMaxTransferBytes = uint64_t{64} << 30;  // a lease's stream, at most
inline constexpr int32_t kMaxTransferTokens = 1 << 24;

struct TransferDescriptor {
  std::string host;
  uint16_t port = 0;
  uint64_t lease = 0;
  uint64_t model_digest = 0;
  uint64_t geometry_digest = 0;
  int32_t n_tokens = 0;
  uint64_t bytes = 0;
  bool operator==(const TransferDescriptor&) const = default;
};

std::string FormatDescriptor(const TransferDescriptor& d);
// INVALID_ARGUMENT naming what is wrong.
StatusOr<TransferDescriptor> ParseDescriptor(std::string_view text);

}  // namespace llm::disagg
