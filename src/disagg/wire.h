// The pull protocol's messages (docs/DISAGG.md), fixed-size and
// little-endian, carried over one UCX stream endpoint per transfer:
//
//   consumer                              producer
//   HELLO lease, model, geom, versions ─►  checks lease and identity
//                                      ◄─  reply: status, stream bytes, tokens
//   PULL lease, offset, length         ─►  extends the lease
//                                      ◄─  reply: status, offset, length, checksum
//                                      ◄─  `length` bytes of the KV stream
//   ... (one PULL per run of at most kPullChunkBytes)
//   DONE lease                         ─►  releases the lease (if the last
//                                          PULL has not already)
//
// A request is kRequestBytes, a reply kReplyBytes. Decoders check every
// field a peer could get wrong: they are parsers of untrusted bytes.
#pragma once

#include <cstdint>
#include <span>

#include "util/status.h"

namespace llm::disagg {

inline constexpr uint32_t kWireMagic = 0x57564b4c;  // "LKVW"
inline constexpr size_t kRequestBytes = 48;
inline constexpr size_t kReplyBytes = 40;

enum class MsgType : uint32_t { kHello = 1, kPull = 2, kDone = 3 };

enum class ReplyCode : uint32_t {
  kOk = 0,
  kNoLease = 1,           // unknown id, or the lease expired
  kModelMismatch = 2,
  kGeometryMismatch = 3,
  kVersionMismatch = 4,   // KV format or protocol version
  kBadRange = 5,          // a PULL outside the stream
};
const char* ReplyCodeText(ReplyCode c);

struct Request {
  MsgType type = MsgType::kHello;
  uint64_t lease = 0;
  // HELLO: the consumer's identity (identity.h). PULL: the range.
  uint64_t model_digest = 0, geometry_digest = 0;
  uint32_t format_version = 0, protocol_version = 0;
  uint64_t offset = 0, length = 0;
};

struct Reply {
  MsgType type = MsgType::kHello;
  ReplyCode code = ReplyCode::kOk;
  // HELLO: total = the stream's bytes, n_tokens. PULL: offset, length,
  // checksum (Hash64 of the bytes that follow).
  uint64_t total = 0;
  int32_t n_tokens = 0;
  uint64_t offset = 0, length = 0, checksum = 0;
};

void EncodeRequest(const Request& r, uint8_t out[kRequestBytes]);
StatusOr<Request> DecodeRequest(std::span<const uint8_t> in);
void EncodeReply(const Reply& r, uint8_t out[kReplyBytes]);
StatusOr<Reply> DecodeReply(std::span<const uint8_t> in);

}  // namespace llm::disagg
