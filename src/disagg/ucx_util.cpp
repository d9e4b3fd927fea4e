#include "disagg/ucx_util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>

#include <cstring>

namespace llm::disagg {

Status UcxFail(const std::string& what, ucs_status_t st) {
  return IoError(what + ": " + ucs_status_string(st));
}

StatusOr<ucp_context_h> CreateUcxContext() {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return UcxFail("UCX configuration", st);
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  p.features = UCP_FEATURE_STREAM | UCP_FEATURE_WAKEUP;
  p.mt_workers_shared = 1;
  ucp_context_h ctx = nullptr;
  st = ucp_init(&p, config, &ctx);
  ucp_config_release(config);
  if (st != UCS_OK) return UcxFail("UCX initialisation", st);
  return ctx;
}

StatusOr<sockaddr_in> ResolveAddress(const std::string& host, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) == 1) return sa;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr)
    return IoError("cannot resolve KV transfer host '" + host + "'");
  sa.sin_addr = reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return sa;
}

StatusOr<sockaddr_in> ParseListenAddress(const std::string& s, bool allow_any_port) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size() || s.size() - colon > 6)
    return InvalidArgument("kv_listen_addr '" + s + "' is not host:port");
  unsigned long port = 0;
  for (size_t i = colon + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return InvalidArgument("kv_listen_addr '" + s + "': the port is not a number");
    port = port * 10 + unsigned(s[i] - '0');
  }
  if (port > 65535 || (port == 0 && !allow_any_port))
    return InvalidArgument("kv_listen_addr '" + s + "': the port is out of range");
  return ResolveAddress(s.substr(0, colon), uint16_t(port));
}

void WaitForEvents(ucp_worker_h worker, int timeout_ms) {
  int fd = -1;
  if (ucp_worker_get_efd(worker, &fd) != UCS_OK) return;
  if (ucp_worker_arm(worker) != UCS_OK) return;  // BUSY: events are pending
  pollfd pfd{fd, POLLIN, 0};
  (void)poll(&pfd, 1, timeout_ms);
}

Status WaitRequest(ucp_worker_h worker, ucs_status_ptr_t req, std::chrono::steady_clock::time_point deadline,
                   const char* what) {
  if (req == nullptr) return Status::Ok();
  if (UCS_PTR_IS_ERR(req)) return UcxFail(what, UCS_PTR_STATUS(req));
  ucs_status_t st;
  while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
    if (ucp_worker_progress(worker) != 0) continue;
    if (std::chrono::steady_clock::now() > deadline) {
      // Not every operation can be cancelled: the request is handed back
      // as it is (UCX finishes it when the endpoint is closed, which the
      // caller does next, before its buffers go).
      ucp_request_cancel(worker, req);
      ucp_request_free(req);
      return IoError(std::string(what) + ": timed out");
    }
    WaitForEvents(worker, 5);
  }
  ucp_request_free(req);
  if (st != UCS_OK) return UcxFail(what, st);
  return Status::Ok();
}

void SendDone(void*, ucs_status_t, void*) {}
void RecvDone(void*, ucs_status_t, size_t, void*) {}

}  // namespace llm::disagg
