// Who may use the server: API keys, and the Host/Origin check that keeps web
// pages out of a server bound to the local machine.
//
// - API keys (--api-key, --api-key-file): when any is set, every endpoint but
//   /health wants one, as "Authorization: Bearer KEY" (OpenAI's clients) or
//   "x-api-key: KEY" (Anthropic's); a missing or wrong key is a 401. Keys are
//   compared in time independent of where they differ, and never logged.
// - DNS rebinding: a page the user opens can make its own host name resolve
//   to 127.0.0.1 and then talk to a local server as a "same-origin" site.
//   Its requests carry that name in Host (and in Origin), so a server bound
//   to a loopback address answers 403 to a Host that is not a loopback name
//   (localhost, 127.0.0.1, [::1], with any port) or one allowed with
//   --allowed-host, and to a request whose Origin names another host.
//   A server bound to another address (exposed on purpose) checks only the
//   allow-list when one is given.
// - CORS (--cors-origins): the origins whose pages may read the server's
//   answers. By default the local ones (localhost, 127.0.0.0/8, [::1]) and
//   the --allowed-host names; "*" allows every origin (and lifts the Origin
//   403); "localhost" names the local ones; other entries are host names
//   (any scheme and port) or whole origins ("https://app.example:8443").
//   A preflight (OPTIONS) needs no key and is answered 200 with the methods
//   and headers allowed, and Access-Control-Allow-Origin (the Origin itself)
//   only for an allowed origin; the answers to allowed origins carry it too.
//
// Pure: the decision takes the header values, so it is tested apart from
// HTTP (tests/test_server_access.cpp).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace server {

struct AccessPolicy {
  std::vector<std::string> api_keys;       // empty: no key needed
  std::vector<std::string> allowed_hosts;  // host names, without port
  bool loopback_bind = true;               // bound to 127.0.0.0/8, ::1 or "localhost"
  std::vector<std::string> cors_origins;   // empty: the default (local origins + allowed hosts)
};

struct AccessDecision {
  int http_status = 0;  // 0: allowed; else 401 or 403
  std::string message;  // never contains a key
};

// `host`, `origin`, `authorization` and `x_api_key` are the headers' values
// ("" when absent). A preflight (`method` OPTIONS) is checked for its Host
// only.
AccessDecision CheckAccess(const AccessPolicy& policy, std::string_view method, std::string_view path,
                           std::string_view host, std::string_view origin, std::string_view authorization,
                           std::string_view x_api_key);

// Whether a page from `origin` (an Origin header's value) may read answers.
bool CorsAllowed(const AccessPolicy& policy, std::string_view origin);

// The CORS headers for a request with this Origin ("" when absent): for a
// preflight the allowed methods and headers, and for an allowed origin
// Access-Control-Allow-Origin (the origin itself), credentials and Vary.
std::vector<std::pair<std::string, std::string>> CorsHeaders(const AccessPolicy& policy, std::string_view origin,
                                                             bool preflight);

// True for the addresses --host may name that only this machine reaches.
bool IsLoopbackAddress(std::string_view address);

// Reads keys from a file, one per line (blank lines and lines starting with
// '#' skipped, surrounding spaces trimmed). False with *error when it cannot
// be read or holds no key.
bool ReadKeyFile(const std::string& path, std::vector<std::string>* keys, std::string* error);

}  // namespace server
