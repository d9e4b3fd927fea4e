// What every POST handler does first and every handler last: read the body
// (at most kMaxBodyBytes, chunked or not), parse it as JSON with the limits
// of request_limits.h, and answer in OpenAI's error shape.
#pragma once

#include <httplib.h>

#include <cstddef>

#include "openai_request.h"

namespace server {

void SendJson(httplib::Response& res, int status, const json& body);
void SendError(httplib::Response& res, const ApiError& e);

// Reads and parses the body. On a problem (multipart: 415; too large: 413;
// too deep, duplicate keys, not JSON: 400) it answers `res` itself and
// returns false. *body_bytes gets the body's size either way.
bool ReadJsonBody(const httplib::Request& req, const httplib::ContentReader& reader, httplib::Response& res,
                  json* body, size_t* body_bytes);

}  // namespace server
