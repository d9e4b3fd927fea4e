#include "disagg/descriptor.h"

#include <cinttypes>
#include <cstdio>

namespace llm::disagg {

namespace {

bool HostChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '-';
}

// Consumes "<key>=" from the front of *s.
bool Key(std::string_view* s, std::string_view key) {
  if (s->size() < key.size() + 1 || s->substr(0, key.size()) != key || (*s)[key.size()] != '=') return false;
  s->remove_prefix(key.size() + 1);
  return true;
}

// The field's text up to the next space (consumed) or the end.
std::string_view Field(std::string_view* s, bool last) {
  const size_t sp = s->find(' ');
  if (last) {
    std::string_view f = *s;
    s->remove_prefix(s->size());
    return f;
  }
  if (sp == std::string_view::npos) return {};
  std::string_view f = s->substr(0, sp);
  s->remove_prefix(sp + 1);
  return f;
}

bool Hex16(std::string_view f, uint64_t* out) {
  if (f.size() != 16) return false;
  uint64_t v = 0;
  for (char c : f) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return false;
    v = v << 4 | uint64_t(d);
  }
  *out = v;
  return true;
}

bool Decimal(std::string_view f, uint64_t max, uint64_t* out) {
  if (f.empty() || f.size() > 20 || (f.size() > 1 && f[0] == '0')) return false;
  uint64_t v = 0;
  for (char c : f) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = uint64_t(c - '0');
    if (v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

}  // namespace

std::string FormatDescriptor(const TransferDescriptor& d) {
  char buf[kMaxDescriptorBytes];
  std::snprintf(buf, sizeof buf,
                "llmkv1 addr=%s:%u lease=%016" PRIx64 " model=%016" PRIx64 " geom=%016" PRIx64
                " tokens=%d bytes=%" PRIu64,
                d.host.c_str(), unsigned(d.port), d.lease, d.model_digest, d.geometry_digest, d.n_tokens, d.bytes);
  return buf;
}

StatusOr<TransferDescriptor> ParseDescriptor(std::string_view s) {
  auto bad = [](const std::string& what) {
    return InvalidArgument("kv_transfer_desc: " + what + " (expected 'llmkv1 addr=HOST:PORT lease=HEX16 model=HEX16 "
                           "geom=HEX16 tokens=N bytes=N')");
  };
  if (s.size() > kMaxDescriptorBytes) return bad("longer than " + std::to_string(kMaxDescriptorBytes) + " bytes");
  if (s.substr(0, 7) != "llmkv1 ") return bad("not an llmkv1 descriptor");
  s.remove_prefix(7);
  TransferDescriptor d;
  if (!Key(&s, "addr")) return bad("no addr");
  std::string_view addr = Field(&s, false);
  const size_t colon = addr.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 253) return bad("addr is not HOST:PORT");
  for (char c : addr.substr(0, colon))
    if (!HostChar(c)) return bad("addr's host has a character outside [0-9A-Za-z.-]");
  uint64_t v = 0;
  if (!Decimal(addr.substr(colon + 1), 65535, &v) || v == 0) return bad("addr's port is not in 1..65535");
  d.host = std::string(addr.substr(0, colon));
  d.port = uint16_t(v);
  if (!Key(&s, "lease") || !Hex16(Field(&s, false), &d.lease)) return bad("lease is not 16 lowercase hex digits");
  if (!Key(&s, "model") || !Hex16(Field(&s, false), &d.model_digest)) return bad("model is not 16 lowercase hex digits");
  if (!Key(&s, "geom") || !Hex16(Field(&s, false), &d.geometry_digest)) return bad("geom is not 16 lowercase hex digits");
  if (!Key(&s, "tokens") || !Decimal(Field(&s, false), kMaxTransferTokens, &v) || v == 0)
    return bad("tokens is not in 1.." + std::to_string(kMaxTransferTokens));
  d.n_tokens = int32_t(v);
  if (!Key(&s, "bytes") || !Decimal(Field(&s, true), kMaxTransferBytes, &v) || v == 0)
    return bad("bytes is not in 1.." + std::to_string(kMaxTransferBytes));
  d.bytes = v;
  return d;
}

}  // namespace llm::disagg
