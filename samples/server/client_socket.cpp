#include "client_socket.h"

#include <poll.h>
#include <sys/socket.h>

namespace server {
namespace {
thread_local int current_sock = -1;
}  // namespace

void SetCurrentClientSocket(int sock) { current_sock = sock; }

bool CurrentClientGone() {
  if (current_sock < 0) return false;
  pollfd p{current_sock, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;  // nothing to read: still there
  if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return true;
  char c;
  return ::recv(current_sock, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;  // 0: the peer shut its side
}

}  // namespace server
