// A listening socket with the system's backlog instead of cpp-httplib's.
//
// cpp-httplib 0.11 listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG).
// A burst of clients connecting at once — llm-disagg-proxy opens one
// connection per upstream call, 64 at a time under 64 concurrent requests —
// overflows that queue whenever the accept thread waits for a core: the
// kernel drops the handshakes beyond it or answers them with SYN cookies,
// and a client whose side of the handshake completed but which the server
// never accepted sends its request into a connection the kernel resets
// later (the client reads ECONNRESET, after tens of seconds, before any
// response byte). ListenBacklog keeps httplib's socket options, notes the
// listening socket as httplib creates it, and Widen() listens on it again
// with SOMAXCONN (Linux takes a second listen() as a new backlog).
#pragma once

#include <httplib.h>
#include <sys/socket.h>

namespace server {

class ListenBacklog {
 public:
  // Before bind_to_port / bind_to_any_port.
  explicit ListenBacklog(httplib::Server* svr) {
    svr->set_socket_options([this](socket_t fd) {
      httplib::default_socket_options(fd);
      fd_ = fd;
    });
  }
  // After a successful bind; false when no socket was noted or listen failed.
  bool Widen() const { return fd_ >= 0 && ::listen(fd_, SOMAXCONN) == 0; }

 private:
  int fd_ = -1;
};

}  // namespace server
