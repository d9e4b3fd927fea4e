// What the UCX server and pull share: a UCX context for stream endpoints,
// address parsing, and waiting on a request with a deadline.
#pragma once

#include <netinet/in.h>
#include <ucp/api/ucp.h>

#include <chrono>
#include <string>

#include "util/status.h"

namespace llm::disagg {

Status UcxFail(const std::string& what, ucs_status_t st);

// A UCX context with the stream API and worker wakeups; workers may be
// made on any thread (each used by one thread).
StatusOr<ucp_context_h> CreateUcxContext();

// "host:port" → IPv4 socket address (numeric or resolved), INVALID_ARGUMENT
// when it does not parse; port 0 allowed when allow_any_port.
StatusOr<sockaddr_in> ParseListenAddress(const std::string& s, bool allow_any_port);
StatusOr<sockaddr_in> ResolveAddress(const std::string& host, uint16_t port);

// Sleeps until the worker has events, at most timeout_ms.
void WaitForEvents(ucp_worker_h worker, int timeout_ms);

// Progresses `worker` until `req` (a ucp *_nbx result) completes or the
// deadline passes (then cancels it and waits for the cancellation). Frees
// the request. Returns the operation's status.
Status WaitRequest(ucp_worker_h worker, ucs_status_ptr_t req, std::chrono::steady_clock::time_point deadline,
                   const char* what);

// Empty completion callbacks (the requests are polled).
void SendDone(void* request, ucs_status_t status, void* user_data);
void RecvDone(void* request, ucs_status_t status, size_t length, void* user_data);

}  // namespace llm::disagg
