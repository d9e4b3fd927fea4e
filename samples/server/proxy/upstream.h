// One HTTP request from the proxy to an llm-server, with its answer either
// whole (Call) or streamed (StreamCall: the status and headers first, then
// the body's chunks through a queue the proxy's response drains).
//
// Every call opens a fresh connection (no keep-alive reuse). A call whose
// connection was closed or reset before any byte of an answer arrived — the
// server never saw the request, or died before answering — is sent once
// more on a new connection to the same server (`retried`); a call that timed
// out is not (it would wait as long again), and neither is one that failed
// after the answer began: a streamed answer that breaks then ends with
// `broken()` set, and the proxy tells its client with an error event.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace proxy {

struct Upstream {
  std::string host;
  int port = 0;
  std::string base() const { return "http://" + host + ":" + std::to_string(port); }
};
// "http://host:port" (or "host:port") -> Upstream; false when it does not parse.
bool ParseUpstream(const std::string& url, Upstream* out);

struct CallResult {
  bool reached = false;    // false: no connection or no answer (error says why)
  bool unconnected = false;  // not reached because no connection was made (another server may be tried)
  bool retried = false;      // the first connection closed before an answer; sent again on a new one
  int status = 0;
  std::string body, content_type, error;
  std::string first_error;  // when retried: why the first attempt failed
};

// POSTs `body` (JSON) to `path`, forwarding `authorization` when not empty.
CallResult Call(const Upstream& u, const std::string& path, const std::string& body,
                const std::string& authorization, int timeout_s);

// A streamed POST: Start runs it on its own thread; WaitHeaders blocks until
// the status is known or the call failed; Next hands out body chunks until
// the end. Destroying it waits for the thread (a stalled upstream ends at
// its read timeout).
class StreamCall {
 public:
  StreamCall(const Upstream& u, std::string path, std::string body, std::string authorization, int timeout_s);
  ~StreamCall();
  // The upstream's status (0: not reached; then error()).
  int WaitHeaders();
  // The next chunk into *out: true; false at the end of the body.
  bool Next(std::string* out);
  const std::string& error() const { return error_; }
  // (after WaitHeaders gave 0) no connection was made at all.
  bool unconnected() const { return unconnected_; }
  // (after WaitHeaders) the first connection closed before an answer and the
  // call was sent again on a new one; first_error() says why.
  bool retried() const { return retried_; }
  const std::string& first_error() const { return first_error_; }
  // (after Next gave false) the answer had begun and its connection failed
  // before its end: why; empty when the body ended normally.
  std::string broken() const;
  std::string content_type() const;

 private:
  void Run(Upstream u, std::string path, std::string body, std::string authorization, int timeout_s);
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> chunks_;
  int status_ = -1;  // -1: headers not yet in
  std::string content_type_;
  bool ended_ = false;
  bool cancelled_ = false;  // the proxy's client went away
  std::string error_, first_error_, broken_;
  bool unconnected_ = false;
  bool retried_ = false;
  std::thread thread_;
};

}  // namespace proxy
