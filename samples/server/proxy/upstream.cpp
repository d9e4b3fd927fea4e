#include "proxy/upstream.h"

#include <httplib.h>

#include <chrono>
#include <cstdlib>

namespace proxy {

bool ParseUpstream(const std::string& url, Upstream* out) {
  std::string s = url;
  if (s.rfind("http://", 0) == 0) s = s.substr(7);
  while (!s.empty() && s.back() == '/') s.pop_back();
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) return false;
  char* end = nullptr;
  const long port = std::strtol(s.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port <= 0 || port > 65535) return false;
  out->host = s.substr(0, colon);
  out->port = static_cast<int>(port);
  return true;
}

namespace {

using Clock = std::chrono::steady_clock;

void Configure(httplib::Client* cli, int timeout_s) {
  cli->set_connection_timeout(5, 0);
  cli->set_read_timeout(timeout_s, 0);
  cli->set_write_timeout(timeout_s, 0);
}

httplib::Request PostRequest(const std::string& path, const std::string& body, const std::string& authorization) {
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  if (!authorization.empty()) req.set_header("Authorization", authorization);
  req.set_header("Content-Type", "application/json");
  req.body = body;
  return req;
}

bool Unconnected(httplib::Error e) { return e == httplib::Error::Connection || e == httplib::Error::ConnectionTimeout; }

// A failed attempt that is worth one more on a new connection: the
// connection was made, then closed or reset (httplib's Read or Write)
// before any answer, and not by the read/write timeout (httplib reports a
// timeout as Read too: told apart by the time it took).
bool ClosedBeforeAnswer(httplib::Error e, bool answered, Clock::time_point start, int timeout_s) {
  if (answered || (e != httplib::Error::Read && e != httplib::Error::Write)) return false;
  return Clock::now() - start < std::chrono::seconds(timeout_s) - std::chrono::milliseconds(250);
}

}  // namespace

CallResult Call(const Upstream& u, const std::string& path, const std::string& body, const std::string& authorization,
                int timeout_s) {
  CallResult r;
  for (int attempt = 0; attempt < 2; ++attempt) {
    httplib::Client cli(u.host, u.port);
    Configure(&cli, timeout_s);
    httplib::Request req = PostRequest(path, body, authorization);
    bool answered = false;
    req.response_handler = [&answered](const httplib::Response&) {
      answered = true;
      return true;
    };
    const auto start = Clock::now();
    httplib::Result res = cli.send(req);
    if (res) {
      r.reached = true;
      r.status = res->status;
      r.body = res->body;
      r.content_type = res->get_header_value("Content-Type");
      r.error.clear();
      return r;
    }
    r.error = httplib::to_string(res.error());
    r.unconnected = Unconnected(res.error());
    if (attempt > 0 || !ClosedBeforeAnswer(res.error(), answered, start, timeout_s)) break;
    r.retried = true;
    r.first_error = r.error;
  }
  return r;
}

StreamCall::StreamCall(const Upstream& u, std::string path, std::string body, std::string authorization,
                       int timeout_s) {
  thread_ = std::thread(&StreamCall::Run, this, u, std::move(path), std::move(body), std::move(authorization),
                        timeout_s);
}

StreamCall::~StreamCall() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;  // the receiver stops at its next chunk; no retry
  }
  if (thread_.joinable()) thread_.join();
}

void StreamCall::Run(Upstream u, std::string path, std::string body, std::string authorization, int timeout_s) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    httplib::Client cli(u.host, u.port);
    Configure(&cli, timeout_s);
    httplib::Request req = PostRequest(path, body, authorization);
    req.response_handler = [this](const httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      status_ = res.status;
      content_type_ = res.get_header_value("Content-Type");
      cv_.notify_all();
      return true;
    };
    req.content_receiver = [this](const char* data, size_t n, uint64_t, uint64_t) {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) return false;  // the proxy's client went away
      chunks_.emplace_back(data, n);
      cv_.notify_all();
      return true;
    };
    const auto start = Clock::now();
    httplib::Result res = cli.send(req);
    std::lock_guard<std::mutex> lock(mu_);
    if (res || cancelled_) break;
    if (status_ > 0) {  // the answer had begun
      broken_ = httplib::to_string(res.error());
      break;
    }
    error_ = httplib::to_string(res.error());
    unconnected_ = Unconnected(res.error());
    if (attempt > 0 || !ClosedBeforeAnswer(res.error(), false, start, timeout_s)) {
      status_ = 0;
      break;
    }
    retried_ = true;
    first_error_ = error_;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (status_ < 0) status_ = 0;
  ended_ = true;
  cv_.notify_all();
}

int StreamCall::WaitHeaders() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return status_ >= 0; });
  return status_;
}

bool StreamCall::Next(std::string* out) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !chunks_.empty() || ended_; });
  if (chunks_.empty()) return false;
  *out = std::move(chunks_.front());
  chunks_.pop_front();
  return true;
}

std::string StreamCall::broken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

std::string StreamCall::content_type() const {
  std::lock_guard<std::mutex> lock(mu_);
  return content_type_;
}

}  // namespace proxy
