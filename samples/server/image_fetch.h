// Fetching a remote image URL (--allow-remote-images) as the bytes of the
// picture, on the thread of the HTTP request that names it (an HTTP worker:
// the engine thread and other requests go on meanwhile). What is refused,
// each a sentence for a 400:
//   - a URL ParseRemoteUrl refuses (other schemes, user@host, odd bytes);
//   - https:// in a build without TLS (cpp-httplib without OpenSSL);
//   - a host not on --allowed-image-domains, when that list is given;
//     without it, a host any of whose addresses is loopback, private,
//     link-local or otherwise not public (remote_url.h: SSRF), checked on
//     the addresses the connection then uses (no second DNS lookup);
//   - a host that does not resolve, a refused or failed connection, TLS
//     that does not verify (the system's CA certificates);
//   - an answer other than 2xx, more than kRemoteImageMaxRedirects
//     redirects (each hop checked as the first URL), a body larger than
//     max_bytes (cut off while it arrives, never buffered past it, whether
//     Content-Length says so or not), an empty body;
//   - anything not done within timeout_s, counted from the start: a watchdog
//     shuts the connection down (a server that trickles its headers or body
//     is cut off, not only a silent one).
// Whether the bytes are a picture is the library's question (llm_submit).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace server {

struct ImageFetchPolicy {
  bool enabled = false;    // --allow-remote-images
  size_t max_bytes = 0;    // --remote-image-max-bytes
  double timeout_s = 0;    // --remote-image-timeout
  int max_redirects = 0;   // kRemoteImageMaxRedirects
  std::vector<std::string> allowed_hosts;  // --allowed-image-domains (CanonicalHost); empty: any public host
};

// The policy with the defaults of src/core/defaults.h, not enabled.
ImageFetchPolicy DefaultImageFetchPolicy();

// True when this build speaks TLS (https:// URLs).
bool ImageFetchHasTls();

// url: as the request sent it. True with *bytes the body; else false with
// *problem.
bool FetchImage(const std::string& url, const ImageFetchPolicy& policy, std::string* bytes, std::string* problem);

}  // namespace server
