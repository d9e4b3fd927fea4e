#include "image_url.h"

#include <cctype>

#include "remote_url.h"

namespace server {

namespace {

int Sextet(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;  // '-' and '_': the URL-safe alphabet
  if (c == '/' || c == '_') return 63;
  return -1;
}

bool StartsWith(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

}  // namespace

bool DecodeBase64(const std::string& in, size_t begin, std::string* out) {
  size_t end = in.size();
  for (int k = 0; k < 2 && end > begin && in[end - 1] == '='; ++k) --end;
  const size_t n = end - begin;
  if (n % 4 == 1) return false;
  out->clear();
  out->reserve(n / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = begin; i < end; ++i) {
    const int v = Sextet(static_cast<unsigned char>(in[i]));
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return true;
}

bool ImageUrlBytes(const nlohmann::json& part, bool allow_remote, std::string* bytes, std::string* remote_url,
                   std::string* problem) {
  remote_url->clear();
  auto it = part.find("image_url");
  const nlohmann::json* url = nullptr;
  if (it != part.end() && it->is_object()) {
    auto u = it->find("url");
    if (u != it->end()) url = &*u;
  } else if (it != part.end() && it->is_string()) {
    url = &*it;  // {"image_url": "data:..."}, as some clients send it
  }
  if (url == nullptr || !url->is_string()) {
    *problem = "an image_url part needs \"image_url\": {\"url\": \"data:image/...;base64,...\"}";
    return false;
  }
  const std::string& u = url->get_ref<const std::string&>();
  std::string scheme;  // as far as a scheme's letters go, lower case
  for (size_t i = 0; i < u.size() && i < 8 && std::isalpha(static_cast<unsigned char>(u[i])); ++i)
    scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(u[i])));
  if ((scheme == "http" || scheme == "https") && u.compare(scheme.size(), 3, "://") == 0) {
    if (!allow_remote) {
      *problem = "remote image URLs are refused (start the server with --allow-remote-images; send the "
                 "picture as a data: URL)";
      return false;
    }
    RemoteUrl parsed;
    if (!ParseRemoteUrl(u, &parsed, problem)) return false;
    bytes->clear();
    *remote_url = u;
    return true;
  }
  if (!StartsWith(u, "data:")) {
    *problem = allow_remote ? "image_url must be a data: URL (data:image/png;base64,...) or an http(s) URL"
                            : "image_url must be a data: URL (data:image/png;base64,...)";
    return false;
  }
  const size_t comma = u.find(',');
  if (comma == std::string::npos) {
    *problem = "the data: URL has no ',' before its data";
    return false;
  }
  const std::string header = u.substr(5, comma - 5);
  if (header.size() < 7 || header.compare(header.size() - 7, 7, ";base64") != 0) {
    *problem = "the data: URL must be base64 (data:<type>;base64,...)";
    return false;
  }
  if (u.size() - comma - 1 > kMaxImageUrlBytes) {
    *problem = "the picture is larger than 64 MiB";
    return false;
  }
  if (!DecodeBase64(u, comma + 1, bytes)) {
    *problem = "the data: URL's base64 does not decode";
    return false;
  }
  if (bytes->empty()) {
    *problem = "the data: URL holds no bytes";
    return false;
  }
  return true;
}

}  // namespace server
