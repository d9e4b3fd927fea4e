// Whether the bytes peeked from a socket hold an HTTP request a worker can
// read without waiting: the connection gate (connection_gate.h) parks a
// connection until this says yes. Pure, so it is fuzzed
// (tests/fuzz/fuzz_request_peek.cpp) apart from the sockets.
#pragma once

#include <cstddef>
#include <string_view>

namespace server {

// got: the bytes available so far; cap: the most the caller peeks at once.
// True when the head ("\r\n\r\n") and, if Content-Length says so, the whole
// body are in `got`; also true for what a worker must answer or read itself
// without waiting for more here: a full peek buffer (a big request), a head
// with Expect (100-continue), no Content-Length (no body, or chunked), or a
// malformed length. False while the head, or a small body, is still arriving.
bool HttpRequestComplete(std::string_view got, size_t cap);

}  // namespace server
