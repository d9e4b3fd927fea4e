#include "proxy/stream_error.h"

namespace proxy {

std::string StreamErrorEvent(Api api, const std::string& message) {
  constexpr const char* kCode = "decode_stream_broken";
  switch (api) {
    case Api::kMessages:
      return "event: error\ndata: " +
             json{{"type", "error"}, {"error", {{"type", "api_error"}, {"message", message}}}}.dump() + "\n\n";
    case Api::kResponses:
      return "event: error\ndata: " +
             json{{"type", "error"}, {"code", kCode}, {"message", message}, {"param", nullptr}}.dump() + "\n\n";
    case Api::kCompletion:
    case Api::kChat:
      break;
  }
  return "data: " +
         json{{"error", {{"message", message}, {"type", "server_error"}, {"param", nullptr}, {"code", kCode}}}}.dump() +
         "\n\n";
}

}  // namespace proxy
