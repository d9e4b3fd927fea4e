#include "disagg/wire.h"

#include <string>

namespace llm::disagg {

namespace {

void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
void Put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(p[i]) << (8 * i);
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

bool KnownType(uint32_t t) { return t >= 1 && t <= 3; }

}  // namespace

const char* ReplyCodeText(ReplyCode c) {
  switch (c) {
    case ReplyCode::kOk: return "ok";
    case ReplyCode::kNoLease: return "the producer holds no such lease (expired, already taken, or never made)";
    case ReplyCode::kModelMismatch: return "the producer runs another model";
    case ReplyCode::kGeometryMismatch: return "the producer's KV geometry differs";
    case ReplyCode::kVersionMismatch: return "the producer speaks another KV format or protocol version";
    case ReplyCode::kBadRange: return "the pull asked for bytes outside the stream";
  }
  return "unknown reply code";
}

// request: magic | type | lease | a | b | u32 c | u32 d     (4+4+8+8+8+4+4 = 40, padded to 48)
void EncodeRequest(const Request& r, uint8_t out[kRequestBytes]) {
  for (size_t i = 0; i < kRequestBytes; ++i) out[i] = 0;
  Put32(out, kWireMagic);
  Put32(out + 4, uint32_t(r.type));
  Put64(out + 8, r.lease);
  const bool hello = r.type == MsgType::kHello;
  Put64(out + 16, hello ? r.model_digest : r.offset);
  Put64(out + 24, hello ? r.geometry_digest : r.length);
  Put32(out + 32, hello ? r.format_version : 0);
  Put32(out + 36, hello ? r.protocol_version : 0);
}

StatusOr<Request> DecodeRequest(std::span<const uint8_t> in) {
  if (in.size() != kRequestBytes) return KvCorrupt("KV pull request of " + std::to_string(in.size()) + " bytes");
  const uint8_t* p = in.data();
  if (Get32(p) != kWireMagic) return KvCorrupt("KV pull request without the protocol's magic");
  if (!KnownType(Get32(p + 4))) return KvCorrupt("KV pull request of unknown type " + std::to_string(Get32(p + 4)));
  for (size_t i = 40; i < kRequestBytes; ++i)
    if (p[i] != 0) return KvCorrupt("KV pull request with non-zero padding");
  Request r;
  r.type = MsgType(Get32(p + 4));
  r.lease = Get64(p + 8);
  if (r.type == MsgType::kHello) {
    r.model_digest = Get64(p + 16);
    r.geometry_digest = Get64(p + 24);
    r.format_version = Get32(p + 32);
    r.protocol_version = Get32(p + 36);
  } else {
    r.offset = Get64(p + 16);
    r.length = Get64(p + 24);
    if (Get32(p + 32) != 0 || Get32(p + 36) != 0) return KvCorrupt("KV pull request with non-zero padding");
    if (r.type == MsgType::kDone && (r.offset != 0 || r.length != 0))
      return KvCorrupt("KV DONE message with a range");
  }
  return r;
}

// reply: magic | type | code | n_tokens | total-or-offset | length | checksum   (4*4 + 3*8 = 40)
void EncodeReply(const Reply& r, uint8_t out[kReplyBytes]) {
  Put32(out, kWireMagic);
  Put32(out + 4, uint32_t(r.type));
  Put32(out + 8, uint32_t(r.code));
  Put32(out + 12, uint32_t(r.n_tokens));
  Put64(out + 16, r.type == MsgType::kHello ? r.total : r.offset);
  Put64(out + 24, r.length);
  Put64(out + 32, r.checksum);
}

StatusOr<Reply> DecodeReply(std::span<const uint8_t> in) {
  if (in.size() != kReplyBytes) return KvCorrupt("KV pull reply of " + std::to_string(in.size()) + " bytes");
  const uint8_t* p = in.data();
  if (Get32(p) != kWireMagic) return KvCorrupt("KV pull reply without the protocol's magic");
  const uint32_t type = Get32(p + 4);
  if (type != uint32_t(MsgType::kHello) && type != uint32_t(MsgType::kPull))
    return KvCorrupt("KV pull reply of unknown type " + std::to_string(type));
  const uint32_t code = Get32(p + 8);
  if (code > uint32_t(ReplyCode::kBadRange)) return KvCorrupt("KV pull reply with unknown code " + std::to_string(code));
  Reply r;
  r.type = MsgType(type);
  r.code = ReplyCode(code);
  r.n_tokens = int32_t(Get32(p + 12));
  if (r.type == MsgType::kHello) r.total = Get64(p + 16);
  else r.offset = Get64(p + 16);
  r.length = Get64(p + 24);
  r.checksum = Get64(p + 32);
  if (r.n_tokens < 0) return KvCorrupt("KV pull reply with a negative token count");
  return r;
}

}  // namespace llm::disagg
