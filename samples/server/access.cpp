#include "access.h"

#include <algorithm>
#include <cctype>
#include <fstream>

namespace server {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// The host name of a Host header value ("name", "name:port", "[v6]:port").
std::string HostName(std::string_view host) {
  host = Trim(host);
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    return Lower(close == std::string_view::npos ? host : host.substr(0, close + 1));
  }
  const size_t colon = host.find(':');
  if (colon != std::string_view::npos && host.find(':', colon + 1) == std::string_view::npos)
    host = host.substr(0, colon);
  return Lower(host);
}

// The host name of an Origin header value ("scheme://name[:port]", or a
// bare "name[:port]" as some clients send); "" for "null".
std::string OriginHost(std::string_view origin) {
  origin = Trim(origin);
  if (origin == "null") return "";
  const size_t scheme = origin.find("://");
  std::string_view rest = scheme == std::string_view::npos ? origin : origin.substr(scheme + 3);
  rest = rest.substr(0, rest.find('/'));
  return HostName(rest);
}

bool IsLoopbackName(const std::string& name) {
  if (name == "localhost" || name.ends_with(".localhost") || name == "[::1]" || name == "::1") return true;
  // 127.0.0.0/8, written as four decimal parts
  if (!name.starts_with("127.")) return false;
  int parts = 2, digits = 0;  // "127." is the first part and its dot
  for (size_t i = 4; i < name.size(); ++i) {
    if (name[i] == '.') {
      if (digits == 0) return false;
      ++parts;
      digits = 0;
    } else if (name[i] >= '0' && name[i] <= '9' && digits < 3) {
      ++digits;
    } else {
      return false;
    }
  }
  return parts == 4 && digits > 0;
}

bool Allowed(const AccessPolicy& p, const std::string& name) {
  for (const std::string& h : p.allowed_hosts)
    if (Lower(h) == name) return true;
  return false;
}

// Equality whose time depends on the lengths only, not on where the first
// difference is.
bool SameKey(std::string_view a, std::string_view b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

// Whether a --cors-origins entry names this origin: "localhost" the local
// names, an entry with "://" the whole origin, any other a host name.
bool CorsEntryMatches(std::string_view entry, std::string_view origin, const std::string& origin_host) {
  entry = Trim(entry);
  if (entry == "localhost") return IsLoopbackName(origin_host);
  if (entry.find("://") != std::string_view::npos) {
    std::string_view o = Trim(origin);
    while (!o.empty() && o.back() == '/') o.remove_suffix(1);
    while (!entry.empty() && entry.back() == '/') entry.remove_suffix(1);
    return Lower(entry) == Lower(o);
  }
  return !origin_host.empty() && HostName(entry) == origin_host;
}

bool CorsAny(const AccessPolicy& p) {
  for (const std::string& e : p.cors_origins)
    if (Trim(e) == "*") return true;
  return false;
}

}  // namespace

bool CorsAllowed(const AccessPolicy& policy, std::string_view origin) {
  if (Trim(origin).empty()) return false;
  if (CorsAny(policy)) return true;
  const std::string host = OriginHost(origin);
  if (host.empty()) return false;
  if (Allowed(policy, host)) return true;
  if (policy.cors_origins.empty()) return IsLoopbackName(host);
  for (const std::string& e : policy.cors_origins)
    if (CorsEntryMatches(e, origin, host)) return true;
  return false;
}

std::vector<std::pair<std::string, std::string>> CorsHeaders(const AccessPolicy& policy, std::string_view origin,
                                                             bool preflight) {
  std::vector<std::pair<std::string, std::string>> h;
  if (CorsAllowed(policy, origin)) {
    h.emplace_back("Access-Control-Allow-Origin", std::string(Trim(origin)));
    h.emplace_back("Vary", "Origin");
  }
  if (preflight || !h.empty()) h.emplace_back("Access-Control-Allow-Credentials", "true");
  if (preflight) {
    h.emplace_back("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    h.emplace_back("Access-Control-Allow-Headers", "*");
    h.emplace_back("Access-Control-Max-Age", "600");
  }
  return h;
}

bool IsLoopbackAddress(std::string_view address) { return IsLoopbackName(HostName(address)) || address == "::1"; }

AccessDecision CheckAccess(const AccessPolicy& policy, std::string_view method, std::string_view path,
                           std::string_view host, std::string_view origin, std::string_view authorization,
                           std::string_view x_api_key) {
  const bool preflight = method == "OPTIONS";
  AccessDecision d;
  // Host first: a rebinding page must learn nothing, not even that a key is needed.
  if (policy.loopback_bind || !policy.allowed_hosts.empty()) {
    const std::string name = HostName(host);
    const bool ok = (policy.loopback_bind && IsLoopbackName(name)) || Allowed(policy, name);
    if (!ok) {
      d.http_status = 403;
      d.message = "Host '" + std::string(host.substr(0, 256)) +
                  "' is not allowed: this server answers only to local host names (--allowed-host adds others)";
      return d;
    }
    if (preflight) return d;  // answered with (or without) the CORS headers
    if (!origin.empty() && origin != "null") {
      const std::string o = OriginHost(origin);
      const bool origin_ok = (policy.loopback_bind && IsLoopbackName(o)) || Allowed(policy, o) ||
                             CorsAllowed(policy, origin);
      if (!origin_ok) {
        d.http_status = 403;
        d.message = "Origin '" + std::string(origin.substr(0, 256)) +
                    "' is not allowed: web pages from other hosts may not use this server";
        return d;
      }
    }
  }
  if (preflight || policy.api_keys.empty() || path == "/health") return d;
  std::string_view key;
  std::string_view auth = Trim(authorization);
  if (auth.size() > 7 && Lower(auth.substr(0, 7)) == "bearer ") key = Trim(auth.substr(7));
  if (key.empty()) key = Trim(x_api_key);
  bool match = false;
  for (const std::string& k : policy.api_keys) match |= SameKey(key, k);  // no early exit
  if (!match) {
    d.http_status = 401;
    d.message = key.empty() ? "an API key is required (Authorization: Bearer <key>)" : "invalid API key";
  }
  return d;
}

bool ReadKeyFile(const std::string& path, std::vector<std::string>* keys, std::string* error) {
  std::ifstream f(path);
  if (!f) {
    *error = "cannot read the API key file " + path;
    return false;
  }
  const size_t before = keys->size();
  std::string line;
  while (std::getline(f, line)) {
    std::string_view k = Trim(line);
    if (k.empty() || k.front() == '#') continue;
    keys->emplace_back(k);
  }
  if (keys->size() == before) {
    *error = "the API key file " + path + " holds no key";
    return false;
  }
  return true;
}

}  // namespace server
