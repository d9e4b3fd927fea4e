// What a remote image URL (--allow-remote-images) may be, decided before any
// connection is made: pure functions, no sockets, no DNS (image_fetch.h does
// the fetching and calls these at each hop).
//
//   ParseRemoteUrl   http(s)://host[:port][/path][?query], strictly: no
//                    user@ (userinfo), no other scheme, no percent-encoded
//                    or odd host bytes, no spaces, controls or non-ASCII
//                    bytes, a port in [1, 65535]; the #fragment is dropped
//   ResolveLocation  a redirect's Location header against the URL it answered
//   HostListed       the --allowed-image-domains check (exact host names)
//   AddressIsPublic  the address check of a host not on that list: loopback,
//                    private, link-local, shared (CGNAT), multicast, reserved
//                    and unspecified addresses are refused (SSRF), IPv4
//                    inside IPv6 (mapped, NAT64, 6to4) judged as IPv4
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace server {

// The longest URL followed (cpp-httplib's own request-target limit).
inline constexpr size_t kMaxRemoteUrlBytes = 8192;

struct RemoteUrl {
  bool https = false;
  std::string host;    // lower case, no trailing dot; an IPv6 literal without its brackets
  int port = 0;        // 80 or 443 when the URL names none
  std::string target;  // path and query as sent in the request line ("/" when empty)

  // The URL again, normalized (scheme and host lower case, default port left out).
  std::string Text() const;
};

// False with *problem (a sentence for a 400) when `url` is not one this
// server fetches.
bool ParseRemoteUrl(std::string_view url, RemoteUrl* out, std::string* problem);

// The absolute URL a redirect's Location names: absolute, scheme-relative
// (//host/...), absolute-path (/...), query-only (?...) or relative to the
// answering URL's directory. False when Location is empty or too long; the
// result still goes through ParseRemoteUrl.
bool ResolveLocation(const RemoteUrl& base, std::string_view location, std::string* url);

// A host name or address as --allowed-image-domains lists it and RemoteUrl
// holds it: lower case, brackets and a trailing dot removed.
std::string CanonicalHost(std::string_view host);

// True when `host` (canonical) is one of `allowed` (canonical): exact names,
// so "example.com" does not admit "cdn.example.com".
bool HostListed(const std::string& host, const std::vector<std::string>& allowed);

// ip: a numeric IPv4 or IPv6 address. True when a fetch for an unlisted host
// may connect to it; else false with *why naming its kind ("loopback",
// "private", ...).
bool AddressIsPublic(const std::string& ip, std::string* why);

}  // namespace server
