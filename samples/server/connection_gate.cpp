#include "connection_gate.h"

#include "client_socket.h"
#include "request_peek.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <string_view>

namespace server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

void CloseSocket(int sock) {
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
}

// poll() one socket for `events`, retrying on EINTR; > 0 when ready.
int PollOne(int sock, short events, milliseconds timeout) {
  pollfd p{sock, events, 0};
  int ms = static_cast<int>(std::max<int64_t>(0, timeout.count()));
  while (true) {
    int r = ::poll(&p, 1, ms);
    if (r >= 0 || errno != EINTR) return r;
  }
}

void AddressOf(int sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if ((peer ? ::getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len)
            : ::getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len)) != 0)
    return;
  char buf[INET6_ADDRSTRLEN] = "";
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    port = ntohs(a->sin6_port);
  }
  ip = buf;
}

// One request's view of a connection. Every read waits at most read_timeout
// and all of them end at the request's deadline, so a client that trickles
// its request cannot hold a worker for longer than request_timeout.
class GateStream : public httplib::Stream {
 public:
  GateStream(int sock, const GateOptions& o)
      : sock_(sock), opt_(o), deadline_(Clock::now() + o.request_timeout) {}

  bool is_readable() const override { return PollOne(sock_, POLLIN, ReadWait()) > 0; }

  // Writable and the peer still there: a streaming response stops writing
  // (and its request is cancelled) once the client has gone away.
  bool is_writable() const override {
    if (PollOne(sock_, POLLOUT, opt_.write_timeout) <= 0) return false;
    pollfd p{sock_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return true;
    if (p.revents & (POLLERR | POLLHUP)) return false;
    char c;
    return ::recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 0;  // 0: orderly shutdown by the peer
  }

  ssize_t read(char* ptr, size_t size) override {
    if (PollOne(sock_, POLLIN, ReadWait()) <= 0) return -1;
    while (true) {
      ssize_t n = ::recv(sock_, ptr, size, 0);
      if (n > 0 && !Count(ptr, static_cast<size_t>(n))) return -1;
      if (n >= 0 || errno != EINTR) return n;
    }
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (PollOne(sock_, POLLOUT, opt_.write_timeout) <= 0) return -1;
    while (true) {
      ssize_t n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
      if (n >= 0 || errno != EINTR) return n;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { AddressOf(sock_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { AddressOf(sock_, false, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  milliseconds ReadWait() const {
    auto left = std::chrono::duration_cast<milliseconds>(deadline_ - Clock::now());
    return std::clamp(left, milliseconds(0), opt_.read_timeout);
  }

  // Counts `n` bytes just read; false when the request passes a limit
  // (GateOptions::max_head_bytes before its blank line, max_request_bytes
  // in all).
  bool Count(const char* p, size_t n) {
    read_ += n;
    for (size_t i = 0; i < n && !head_done_; ++i) {  // "\r\n\r\n", across reads
      const char want = (crlf_ % 2 == 0) ? '\r' : '\n';
      crlf_ = p[i] == want ? crlf_ + 1 : (p[i] == '\r' ? 1 : 0);
      if (crlf_ == 4) head_done_ = true;
    }
    if (!head_done_ && read_ > opt_.max_head_bytes) return false;
    return read_ <= opt_.max_request_bytes;
  }

  int sock_;
  const GateOptions& opt_;
  Clock::time_point deadline_;
  size_t read_ = 0;
  bool head_done_ = false;
  int crlf_ = 0;  // how much of "\r\n\r\n" the last bytes were
};

// What httplib owns and deletes: a handle on the server's pool.
class PoolHandle : public httplib::TaskQueue {
 public:
  explicit PoolHandle(GatePool* pool) : pool_(pool) {}
  void enqueue(std::function<void()> fn) override { pool_->enqueue(std::move(fn)); }
  void shutdown() override { pool_->shutdown(); }

 private:
  GatePool* pool_;
};

}  // namespace

// ------------------------------------------------------------ GatePool

namespace {

constexpr size_t kPeekBytes = 64 << 10;  // requests up to this size are waited for whole

}  // namespace

bool GatePool::RequestReady(int sock) {
  thread_local std::vector<char> buf(kPeekBytes);
  ssize_t n;
  do {
    n = ::recv(sock, buf.data(), buf.size(), MSG_PEEK | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return true;  // EOF: the worker sees it and closes
  if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;  // an error: the worker fails and closes
  return HttpRequestComplete(std::string_view(buf.data(), static_cast<size_t>(n)), buf.size());
}

GatePool::GatePool(const GateOptions& o) : opt_(o) {
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (::pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
  if (epoll_ >= 0 && wake_[0] >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_[0];
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_[0], &ev);
  }
  for (int i = 0; i < std::max(1, o.workers); ++i) workers_.emplace_back([this] { Work(); });
  gate_ = std::thread([this] { Gate(); });
}

GatePool::~GatePool() {
  shutdown();
  if (wake_[0] >= 0) ::close(wake_[0]);
  if (wake_[1] >= 0) ::close(wake_[1]);
  if (epoll_ >= 0) ::close(epoll_);
}

void GatePool::Wake() {
  if (wake_[1] < 0) return;
  char c = 1;
  (void)!::write(wake_[1], &c, 1);  // a full pipe is already a pending wakeup
}

void GatePool::enqueue(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(fn));
  }
  cv_.notify_one();
}

void GatePool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
  }
  Wake();
  cv_.notify_all();
  if (gate_.joinable()) gate_.join();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void GatePool::Unpark(int sock) {
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, sock, nullptr);
  parked_.erase(sock);
}

void GatePool::Park(int sock, milliseconds timeout, std::function<void()> serve) {
  int evicted = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || epoll_ < 0) {
      evicted = sock;
    } else {
      parked_[sock] = Parked{Clock::now() + timeout, next_order_++, std::move(serve)};
      // Edge-triggered: the gate hears of each arrival of new bytes once, so
      // a partial request does not wake it again until more comes. Bytes
      // already there are reported at once.
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
      ev.data.fd = sock;
      if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, sock, &ev) != 0) {
        parked_.erase(sock);
        evicted = sock;
      } else if (parked_.size() > opt_.max_parked) {
        auto oldest = std::min_element(parked_.begin(), parked_.end(),
                                       [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
        evicted = oldest->first;
        Unpark(evicted);
      }
    }
  }
  if (evicted >= 0) CloseSocket(evicted);
  Wake();  // the gate recomputes its next deadline
}

size_t GatePool::parked() const {
  std::lock_guard<std::mutex> lock(mu_);
  return parked_.size();
}

void GatePool::Work() {
  while (true) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and the queue is drained
      fn = std::move(tasks_.front());
      tasks_.pop_front();
    }
    fn();
  }
}

void GatePool::Gate() {
  std::vector<epoll_event> events(256);
  std::vector<int> to_close;
  while (true) {
    milliseconds wait(1000);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) break;
      const auto now = Clock::now();
      for (const auto& [sock, p] : parked_)
        wait = std::min(wait, std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(p.deadline - now)));
    }
    int n = epoll_ < 0 ? -1 : ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()),
                                          static_cast<int>(wait.count()) + 1);
    if (n < 0) {
      if (errno != EINTR) std::this_thread::sleep_for(milliseconds(10));
      n = 0;
    }
    to_close.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t ready = 0;
      for (int i = 0; i < n; ++i) {
        const int fd = events[static_cast<size_t>(i)].data.fd;
        if (fd == wake_[0]) {
          char buf[64];
          while (::read(wake_[0], buf, sizeof buf) > 0) {
          }
          continue;
        }
        auto it = parked_.find(fd);
        if (it == parked_.end() || !RequestReady(fd)) continue;  // evicted meanwhile, or still arriving
        tasks_.push_back(std::move(it->second.serve));
        Unpark(fd);
        ++ready;
      }
      const auto now = Clock::now();
      for (auto it = parked_.begin(); it != parked_.end();) {
        if (it->second.deadline > now) {
          ++it;
          continue;
        }
        to_close.push_back(it->first);
        ::epoll_ctl(epoll_, EPOLL_CTL_DEL, it->first, nullptr);
        it = parked_.erase(it);
      }
      if (ready > 0) cv_.notify_all();
    }
    for (int s : to_close) CloseSocket(s);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [sock, p] : parked_) {
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, sock, nullptr);
    CloseSocket(sock);
  }
  parked_.clear();
}

// ------------------------------------------------------------ GatedServer

GatedServer::GatedServer(const GateOptions& o) : opt_(o), pool_(std::make_unique<GatePool>(o)) {
  new_task_queue = [this] { return new PoolHandle(pool_.get()); };
}

GatedServer::~GatedServer() { pool_->shutdown(); }

bool GatedServer::process_and_close_socket(socket_t sock) {
  if (!GatePool::RequestReady(sock)) {
    pool_->Park(sock, opt_.first_request_timeout, [this, sock] { Serve(sock, 0); });
    return true;
  }
  Serve(sock, 0);
  return true;
}

void GatedServer::Serve(int sock, size_t served) {
  while (is_running()) {
    GateStream strm(sock, opt_);
    bool connection_closed = false;
    const bool close_after = served + 1 >= keep_alive_max_count_;
    SetCurrentClientSocket(sock);
    const bool ok = process_request(strm, close_after, connection_closed, nullptr);
    SetCurrentClientSocket(-1);
    ++served;
    if (!ok || connection_closed || close_after) break;
    if (!GatePool::RequestReady(sock)) {
      // Between requests (or the next one still arriving): wait in the
      // gate, not on this worker.
      pool_->Park(sock, opt_.keep_alive_timeout, [this, sock, served] { Serve(sock, served); });
      return;
    }
  }
  CloseSocket(sock);
}

}  // namespace server
