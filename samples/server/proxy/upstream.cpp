#include "proxy/upstream.h"

#include <httplib.h>

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

httplib::Headers Headers(const std::string& authorization) {
  httplib::Headers h;
  if (!authorization.empty()) h.emplace("Authorization", authorization);
  return h;
}

void Configure(httplib::Client* cli, int timeout_s) {
  cli->set_connection_timeout(5, 0);
  cli->set_read_timeout(timeout_s, 0);
  cli->set_write_timeout(timeout_s, 0);
}

}  // namespace

CallResult Call(const Upstream& u, const std::string& path, const std::string& body, const std::string& authorization,
                int timeout_s) {
  httplib::Client cli(u.host, u.port);
  Configure(&cli, timeout_s);
  CallResult r;
  httplib::Result res = cli.Post(path.c_str(), Headers(authorization), body, "application/json");
  if (!res) {
    r.error = httplib::to_string(res.error());
    r.unconnected = res.error() == httplib::Error::Connection || res.error() == httplib::Error::ConnectionTimeout;
    return r;
  }
  r.reached = true;
  r.status = res->status;
  r.body = res->body;
  r.content_type = res->get_header_value("Content-Type");
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
    ended_ = true;  // the receiver stops at its next chunk
  }
  if (thread_.joinable()) thread_.join();
}

void StreamCall::Run(Upstream u, std::string path, std::string body, std::string authorization, int timeout_s) {
  httplib::Client cli(u.host, u.port);
  Configure(&cli, timeout_s);
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = Headers(authorization);
  req.body = std::move(body);
  req.set_header("Content-Type", "application/json");
  req.response_handler = [this](const httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = res.status;
    content_type_ = res.get_header_value("Content-Type");
    cv_.notify_all();
    return true;
  };
  req.content_receiver = [this](const char* data, size_t n, uint64_t, uint64_t) {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return false;  // the proxy's client went away
    chunks_.emplace_back(data, n);
    cv_.notify_all();
    return true;
  };
  httplib::Result res = cli.send(req);
  std::lock_guard<std::mutex> lock(mu_);
  if (!res && status_ <= 0) {
    status_ = 0;
    error_ = httplib::to_string(res.error());
    unconnected_ = res.error() == httplib::Error::Connection || res.error() == httplib::Error::ConnectionTimeout;
  }
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

std::string StreamCall::content_type() const {
  std::lock_guard<std::mutex> lock(mu_);
  return content_type_;
}

}  // namespace proxy
