// Whether the client of the request a worker thread serves is still there,
// for handlers that wait long before they answer (a non-streamed
// generation): the connection gate (connection_gate.h) names the socket of
// the request it hands to process_request; without the gate (another
// cpp-httplib) no socket is known and the client is taken to be there.
#pragma once

namespace server {

// Set by the gate around each request it serves (-1 after).
void SetCurrentClientSocket(int sock);

// True once the current request's client has closed its connection (an
// orderly shutdown or an error), without waiting and without consuming
// anything it sent.
bool CurrentClientGone();

}  // namespace server
