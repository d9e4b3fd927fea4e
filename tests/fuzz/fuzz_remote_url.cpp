// Fuzzes llm-server's checks on remote image URLs
// (samples/server/remote_url.h) with the input as a URL, or as a URL and a
// redirect's Location (split at the first newline), and checks what must
// hold whatever the bytes: an accepted URL has a host, a port in range and a
// target that starts with '/', and its normalized text parses again to the
// same URL; a resolved Location is within the length limit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "remote_url.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nl = all.find('\n');
  const std::string_view first = all.substr(0, nl);
  server::RemoteUrl u;
  std::string problem;
  if (server::ParseRemoteUrl(all, &u, &problem)) {
    if (u.host.empty() || u.port < 1 || u.port > 65535 || u.target.empty() || u.target[0] != '/') std::abort();
    server::RemoteUrl again;
    if (!server::ParseRemoteUrl(u.Text(), &again, &problem) || again.Text() != u.Text() || again.host != u.host ||
        again.port != u.port || again.target != u.target || again.https != u.https)
      std::abort();
  } else if (problem.empty()) {
    std::abort();
  }
  if (nl != std::string_view::npos && server::ParseRemoteUrl(first, &u, &problem)) {
    std::string next;
    if (server::ResolveLocation(u, all.substr(nl + 1), &next)) {
      if (next.size() > server::kMaxRemoteUrlBytes) std::abort();
      server::RemoteUrl v;
      (void)server::ParseRemoteUrl(next, &v, &problem);
    }
  }
  std::string why;
  const std::string text(first);
  (void)server::AddressIsPublic(text, &why);
  (void)server::HostListed(server::CanonicalHost(text), {"example.com", "127.0.0.1"});
  return 0;
}
