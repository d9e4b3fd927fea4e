// One HTTP request from the proxy to an llm-server, with its answer either
// whole (Call) or streamed (StreamCall: the status and headers first, then
// the body's chunks through a queue the proxy's response drains).
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
  int status = 0;
  std::string body, content_type, error;
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
  std::string content_type() const;

 private:
  void Run(Upstream u, std::string path, std::string body, std::string authorization, int timeout_s);
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> chunks_;
  int status_ = -1;  // -1: headers not yet in
  std::string content_type_;
  bool ended_ = false;
  std::string error_;
  bool unconnected_ = false;
  std::thread thread_;
};

}  // namespace proxy
