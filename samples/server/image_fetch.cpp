#include "image_fetch.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

#include <httplib.h>

#include "../../src/core/defaults.h"
#include "remote_url.h"

namespace server {

namespace {

using Clock = std::chrono::steady_clock;

bool Fail(std::string* problem, std::string why) {
  *problem = std::move(why);
  return false;
}

// The addresses `host` resolves to, looked up on a thread of its own so that
// a resolver that does not answer costs no more than the fetch's deadline
// (getaddrinfo cannot be interrupted; the thread ends by itself later).
struct Lookup {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int rc = 0;
  std::vector<std::string> ips;
};

bool Resolve(const std::string& host, Clock::time_point deadline, std::vector<std::string>* ips,
             std::string* problem) {
  auto st = std::make_shared<Lookup>();
  try {
    std::thread([st, host] {
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* res = nullptr;
      const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
      std::vector<std::string> out;
      for (const addrinfo* p = rc == 0 ? res : nullptr; p != nullptr; p = p->ai_next) {
        char buf[INET6_ADDRSTRLEN] = {};
        const void* a = p->ai_family == AF_INET    ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(p->ai_addr)->sin_addr)
                        : p->ai_family == AF_INET6 ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(p->ai_addr)->sin6_addr)
                                                   : nullptr;
        if (a != nullptr && inet_ntop(p->ai_family, a, buf, sizeof buf) != nullptr &&
            std::find(out.begin(), out.end(), buf) == out.end())
          out.emplace_back(buf);
      }
      if (res != nullptr) freeaddrinfo(res);
      std::lock_guard<std::mutex> lock(st->mu);
      st->rc = rc;
      st->ips = std::move(out);
      st->done = true;
      st->cv.notify_all();
    }).detach();
  } catch (const std::system_error&) {
    return Fail(problem, "the server could not start a lookup of the image host (out of threads)");
  }
  std::unique_lock<std::mutex> lock(st->mu);
  if (!st->cv.wait_until(lock, deadline, [&] { return st->done; }))
    return Fail(problem, "looking up the image host '" + host + "' took longer than --remote-image-timeout");
  if (st->rc != 0 || st->ips.empty())
    return Fail(problem, "the image host '" + host + "' does not resolve (" +
                             (st->rc != 0 ? gai_strerror(st->rc) : "no address") + ")");
  *ips = std::move(st->ips);
  return true;
}

// Shuts the current client's connection down once the deadline passes, and
// again every 50 ms until the fetch ends (a stop() between two steps of
// cpp-httplib's client finds no request in flight and would be missed).
class Watchdog {
 public:
  explicit Watchdog(Clock::time_point deadline) : thread_([this, deadline] { Run(deadline); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // The client of the hop now running (nullptr between hops).
  void Attach(httplib::ClientImpl* client) {
    std::lock_guard<std::mutex> lock(mu_);
    client_ = client;
    if (client_ != nullptr && fired_) client_->stop();
  }
  bool fired() const {
    std::lock_guard<std::mutex> lock(mu_);
    return fired_;
  }

 private:
  void Run(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_until(lock, deadline, [this] { return done_; })) return;
    fired_ = true;
    while (!done_) {
      if (client_ != nullptr) client_->stop();
      cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return done_; });
    }
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool fired_ = false;
  httplib::ClientImpl* client_ = nullptr;
  std::thread thread_;  // last: started once the fields above exist
};

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

enum class Hop { kBody, kRedirect, kFailed };

Hop Failed(std::string* problem, std::string why) {
  *problem = std::move(why);
  return Hop::kFailed;
}

// One request of a fetch: the body into *bytes, or the next URL into *next.
Hop FetchOnce(const RemoteUrl& u, const ImageFetchPolicy& p, Clock::time_point deadline, Watchdog* watchdog,
              std::string* bytes, std::string* next, std::string* problem) {
  const std::string host = u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host;
  if (u.https && !ImageFetchHasTls())
    return Failed(problem, "https:// image URLs need TLS, and this build of llm-server has none "
                         "(cpp-httplib without OpenSSL)");
  const bool listed = HostListed(u.host, p.allowed_hosts);
  if (!p.allowed_hosts.empty() && !listed)
    return Failed(problem, "the image host '" + u.host + "' is not one of --allowed-image-domains");
  std::vector<std::string> ips;
  if (!Resolve(u.host, deadline, &ips, problem)) return Hop::kFailed;
  std::string why;
  for (const std::string& ip : ips) {
    if (!listed && !AddressIsPublic(ip, &why))
      return Failed(problem, "the image host '" + u.host + "' resolves to " + ip + ", a " + why +
                               " address: refused (list the host in --allowed-image-domains to fetch from it)");
  }
  std::unique_ptr<httplib::ClientImpl> cli;
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  if (u.https) cli = std::make_unique<httplib::SSLClient>(u.host, u.port);
#endif
  if (!u.https) cli = std::make_unique<httplib::ClientImpl>(u.host, u.port);
  if (cli == nullptr || !cli->is_valid()) return Failed(problem, "the server could not set up TLS");
  // Connect to the address checked above, not to a second lookup's answer.
  cli->set_hostname_addr_map({{u.host, ips.front()}});
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now()).count();
  if (left <= 0) return Failed(problem, "the image URL did not answer within --remote-image-timeout");
  const time_t sec = static_cast<time_t>(left / 1000000), usec = static_cast<time_t>(left % 1000000);
  cli->set_connection_timeout(sec, usec);
  cli->set_read_timeout(sec, usec);
  cli->set_write_timeout(sec, usec);
  cli->set_keep_alive(false);
  cli->set_follow_location(false);  // redirects are followed below, each hop checked
  cli->set_decompress(false);       // the cap is on the bytes that arrive
  cli->set_url_encode(false);       // ParseRemoteUrl admitted only URL characters
  const httplib::Headers headers = {{"Accept", "image/png, image/jpeg, image/webp, image/*"},
                                    {"User-Agent", "llm-server"}};
  int status = 0;
  std::string location;
  bool too_big = false;
  auto on_response = [&](const httplib::Response& r) {
    status = r.status;
    if (r.status >= 300 && r.status < 400) location = r.get_header_value("Location");
    if (r.status < 200 || r.status >= 300) return false;  // the body is not read
    const std::string len = r.get_header_value("Content-Length");
    if (!len.empty() && (len.size() > 19 || std::strtoull(len.c_str(), nullptr, 10) > p.max_bytes)) {
      too_big = true;
      return false;
    }
    return true;
  };
  bytes->clear();
  auto on_data = [&](const char* data, size_t n) {
    if (bytes->size() + n > p.max_bytes) {
      too_big = true;
      return false;
    }
    bytes->append(data, n);
    return true;
  };
  watchdog->Attach(cli.get());
  const httplib::Result res = cli->Get(u.target, headers, on_response, on_data);
  watchdog->Attach(nullptr);
  const std::string where = u.Text();
  // The watchdog and httplib's own read timeout (set to the time left) end
  // a silent peer at the same moment, whichever runs first: both are the
  // timeout.
  const bool failed = !res || res.error() != httplib::Error::Success;
  const bool late = Clock::now() + std::chrono::milliseconds(50) >= deadline;
  if (watchdog->fired() || (failed && late))
    return Failed(problem, "the image URL " + where + " did not answer within --remote-image-timeout (" +
                             Seconds(p.timeout_s) + ")");
  if (too_big)
    return Failed(problem, "the image at " + where + " is larger than --remote-image-max-bytes (" +
                             std::to_string(p.max_bytes) + " bytes)");
  if (status >= 300 && status < 400) {
    if (location.empty() || !ResolveLocation(u, location, next))
      return Failed(problem, "the image URL " + where + " answered HTTP " + std::to_string(status) +
                               " without a usable Location");
    return Hop::kRedirect;
  }
  if (status != 0 && (status < 200 || status >= 300))
    return Failed(problem, "the image URL " + where + " answered HTTP " + std::to_string(status));
  if (!res || res.error() != httplib::Error::Success) {
    const httplib::Error e = res.error();
    const std::string what = e == httplib::Error::Connection ? "could not connect to " + host + ":" + std::to_string(u.port)
                             : e == httplib::Error::SSLServerVerification
                                 ? "its TLS certificate does not verify"
                                 : e == httplib::Error::SSLConnection ? "the TLS handshake failed"
                                                                      : httplib::to_string(e);
    return Failed(problem, "fetching the image at " + where + " failed: " + what);
  }
  if (bytes->empty()) return Failed(problem, "the image URL " + where + " answered no bytes");
  return Hop::kBody;
}

}  // namespace

ImageFetchPolicy DefaultImageFetchPolicy() {
  ImageFetchPolicy p;
  p.max_bytes = llm::defaults::kRemoteImageMaxBytes;
  p.timeout_s = llm::defaults::kRemoteImageTimeoutS;
  p.max_redirects = llm::defaults::kRemoteImageMaxRedirects;
  return p;
}

bool ImageFetchHasTls() {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  return true;
#else
  return false;
#endif
}

bool FetchImage(const std::string& url, const ImageFetchPolicy& policy, std::string* bytes, std::string* problem) {
  if (!policy.enabled)
    return Fail(problem, "remote image URLs are refused (start the server with --allow-remote-images; send the "
                         "picture as a data: URL)");
  const Clock::time_point deadline =
      Clock::now() + std::chrono::microseconds(static_cast<int64_t>(policy.timeout_s * 1e6));
  std::string current = url;
  try {
    Watchdog watchdog(deadline);
    for (int hop = 0;; ++hop) {
      RemoteUrl u;
      if (!ParseRemoteUrl(current, &u, problem)) {
        if (hop > 0) *problem = "a redirect of the image URL leads to '" + current.substr(0, 200) + "': " + *problem;
        return false;
      }
      std::string next;
      const Hop h = FetchOnce(u, policy, deadline, &watchdog, bytes, &next, problem);
      if (h == Hop::kBody) return true;
      if (h == Hop::kFailed) return false;
      if (hop == policy.max_redirects)
        return Fail(problem, "the image URL " + url.substr(0, 200) + " redirects more than " +
                                 std::to_string(policy.max_redirects) + " times");
      current = std::move(next);
    }
  } catch (const std::system_error&) {
    return Fail(problem, "the server could not start the image fetch's timer (out of threads)");
  }
}

}  // namespace server
