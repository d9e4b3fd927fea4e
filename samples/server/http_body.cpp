#include "http_body.h"

#include <cstdlib>
#include <string>

#include "openai_response.h"
#include "request_limits.h"

namespace server {
namespace {

// Read through our own receiver so that every body, chunked ones included,
// stops at kMaxBodyBytes (cpp-httplib 0.11 applies its payload limit to
// Content-Length bodies only).
bool ReadBody(const httplib::Request& req, const httplib::ContentReader& reader, std::string* body) {
  if (req.has_header("Content-Length") &&
      std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10) > kMaxBodyBytes)
    return false;
  bool too_large = false;
  reader([&](const char* data, size_t n) {
    if (body->size() + n > kMaxBodyBytes) {
      too_large = true;
      return false;
    }
    body->append(data, n);
    return true;
  });
  return !too_large;
}

}  // namespace

void SendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(Dump(body), "application/json");
}

void SendError(httplib::Response& res, const ApiError& e) { SendJson(res, e.http_status, ErrorBody(e)); }

bool ReadJsonBody(const httplib::Request& req, const httplib::ContentReader& reader, httplib::Response& res,
                  json* body, size_t* body_bytes) {
  *body_bytes = 0;
  ApiError err;
  if (req.is_multipart_form_data()) {
    err.http_status = 415;
    err.message = "the request body must be JSON (got " + req.get_header_value("Content-Type") + ")";
    res.set_header("Connection", "close");
    SendError(res, err);
    return false;
  }
  std::string text;
  const bool complete = ReadBody(req, reader, &text);
  *body_bytes = text.size();
  if (!complete) {
    err.http_status = 413;
    err.message = "the request body is larger than " + std::to_string(kMaxBodyBytes) + " bytes (the limit)";
    res.set_header("Connection", "close");
    SendError(res, err);
    return false;
  }
  if (!ParseRequestBody(text, body, &err.param, &err.code, &err.message)) {
    SendError(res, err);
    return false;
  }
  return true;
}

}  // namespace server
