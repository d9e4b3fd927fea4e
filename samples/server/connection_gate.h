// An HTTP server whose worker threads only ever serve connections whose
// request has arrived.
//
// cpp-httplib hands every accepted socket to a worker thread, which then
// blocks until the client has sent its request or the keep-alive / read
// timeout (5 s) passes. 300 clients that connect and say nothing therefore
// hold every worker for seconds each (a real request queued behind them
// waited 36 s), and clients that trickle a request head a byte at a time
// hold a worker for as long as they keep trickling. Here a connection whose
// request is not complete yet (a fresh one, a keep-alive one between
// requests, a slow one) is parked instead: one gate thread watches all
// parked sockets with epoll and queues a socket for a worker only once its
// request head — and its body, when Content-Length says it is small — can be
// read without waiting, and closes it when that has not happened by its
// deadline.
//
//   accept ─► worker: request complete? ── no ──► gate (epoll, peek) ── complete ──► worker queue
//                   │ yes                            └── not by the deadline: close
//                   ▼
//             serve requests while complete ones are waiting; then park again
//
// A request over 64 KiB (or with Expect: 100-continue, or chunked) goes to a
// worker once its head is complete; that worker's reads share one deadline,
// `request_timeout`.
//
// The serving loop uses httplib::Server's protected process_request and
// overrides its process_and_close_socket, both as cpp-httplib 0.11 declares
// them (Debian 12's libcpp-httplib-dev); CMake builds this file only for
// that version, and the server falls back to plain httplib otherwise.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace server {

struct GateOptions {
  int workers = 8;
  std::chrono::milliseconds first_request_timeout{10000};  // a new connection's whole request
  std::chrono::milliseconds keep_alive_timeout{5000};      // between requests
  std::chrono::milliseconds read_timeout{5000};            // one read of a request
  std::chrono::milliseconds request_timeout{30000};        // all reads of one request
  std::chrono::milliseconds write_timeout{30000};          // one write of a response
  size_t max_parked = 4096;  // beyond this the longest-parked connection is closed
  // The most one request may send: its head (request line and headers;
  // cpp-httplib 0.11 bounds each line but not their number), and head and
  // body together on the wire (the body limit, 16 MiB, plus chunk framing).
  // Past either the connection is closed: a client cannot grow a worker's
  // memory by sending headers, or a body, without end.
  size_t max_head_bytes = size_t{64} << 10;
  size_t max_request_bytes = size_t{18} << 20;
};

// A worker pool plus the gate thread. It is the server's TaskQueue (accepted
// sockets arrive through enqueue) and owns the parked sockets.
class GatePool : public httplib::TaskQueue {
 public:
  explicit GatePool(const GateOptions& o);
  ~GatePool() override;  // shutdown()

  void enqueue(std::function<void()> fn) override;
  // Stops the gate (closing every parked socket), lets the workers finish
  // the queued tasks, joins them. Idempotent.
  void shutdown() override;

  // Hands `sock` to the gate: `serve` is queued for a worker once
  // RequestReady(sock) (or EOF, or an error); the socket is closed if that
  // has not happened within `timeout`, or at shutdown. After shutdown the
  // socket is closed at once.
  void Park(int sock, std::chrono::milliseconds timeout, std::function<void()> serve);

  // True when a worker can serve `sock` without waiting: the bytes already
  // received hold a whole request head and (for a body of known, small
  // length) its body; or the connection is at EOF or failed. Only peeks.
  static bool RequestReady(int sock);

  size_t parked() const;

 private:
  struct Parked {
    std::chrono::steady_clock::time_point deadline;
    uint64_t order;  // parking order: the lowest is evicted first
    std::function<void()> serve;
  };
  void Work();
  void Gate();
  void Wake();
  void Unpark(int sock);  // under mu_: stop watching, forget

  const GateOptions opt_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::unordered_map<int, Parked> parked_;  // by socket; the gate owns these sockets
  uint64_t next_order_ = 0;
  bool stopping_ = false;
  int epoll_ = -1;
  int wake_[2] = {-1, -1};  // self-pipe that interrupts the gate's epoll_wait
  std::vector<std::thread> workers_;
  std::thread gate_;
};

// httplib::Server serving through a GatePool. Set it up like a Server; its
// new_task_queue is set here. The pool belongs to this server, not to
// httplib (which deletes the queue new_task_queue returns): httplib gets a
// forwarding handle.
class GatedServer : public httplib::Server {
 public:
  explicit GatedServer(const GateOptions& o);
  ~GatedServer() override;

  GatePool& pool() { return *pool_; }

 private:
  // Called on a worker for each accepted socket.
  bool process_and_close_socket(socket_t sock) override;
  // Serves requests on `sock` while the client keeps sending, then parks it
  // (or closes it). `served`: requests already served on this connection.
  void Serve(int sock, size_t served);

  GateOptions opt_;
  std::unique_ptr<GatePool> pool_;
};

}  // namespace server
