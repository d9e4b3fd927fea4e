// The last event of a streamed answer whose decode server failed after the
// answer began (its connection closed or reset mid-stream): an error in the
// shape the client's API streams errors, so that the official clients raise
// (OpenAI's completions and chat, Anthropic's Messages) or report an error
// event (OpenAI's Responses) instead of taking a cut answer as whole.
#pragma once

#include <string>

#include "proxy/routing.h"

namespace proxy {

std::string StreamErrorEvent(Api api, const std::string& message);

}  // namespace proxy
