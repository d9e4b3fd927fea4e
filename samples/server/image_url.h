// OpenAI's image content parts ({"type": "image_url", "image_url": {"url":
// ...}}) as the bytes of the picture: a data: URL with base64 data is
// decoded here (the library sniffs the format and decodes the picture at
// llm_submit); a remote http(s) URL is refused, or with
// --allow-remote-images checked (remote_url.h) and handed back to be
// fetched once the whole request has parsed (image_fetch.h); any other URL
// is refused. Each refusal names the problem (400).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace server {

// The largest base64 text one picture may be (the library's 64 MiB of
// encoded bytes, as base64).
inline constexpr size_t kMaxImageUrlBytes = ((size_t{64} << 20) + 2) / 3 * 4;

// part: one content part whose type is "image_url". On success *bytes holds
// the picture's encoded bytes, or (a remote URL, allowed) *bytes is empty
// and *remote_url the URL to fetch; else *problem says why not.
bool ImageUrlBytes(const nlohmann::json& part, bool allow_remote, std::string* bytes, std::string* remote_url,
                   std::string* problem);

// Strict base64 (RFC 4648, padding optional, no whitespace): false on any
// other character or an impossible length.
bool DecodeBase64(const std::string& in, size_t begin, std::string* out);

}  // namespace server
