// The HTTP endpoints: OpenAI's /v1/chat/completions, /v1/completions and
// /v1/models, llama.cpp's native /completion (native_completion.h), plus
// /v1/stats (llm_get_stats as JSON), /metrics (the same in Prometheus' text
// format) and /health.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../chat_prompt.h"
#include "access.h"
#include "engine.h"
#include "idle_trim.h"
#include "openai_request.h"
#include "image_fetch.h"
#include "request_defaults.h"
#include "slot_store.h"

namespace httplib {
class Server;
class ContentReader;
struct Request;
struct Response;
}

namespace server {

// Puts `policy` (access.h) in front of every route: a request it refuses is
// answered 401 or 403 before its body is read.
void InstallAccessCheck(httplib::Server* svr, AccessPolicy policy);

class Routes {
 public:
  // engine and prompter must outlive the server the routes are registered on.
  Routes(Engine* engine, const chat::Prompter* prompter, std::string model_name, bool log);

  // The server's sampling flags (request_defaults.h); set before Register.
  void set_defaults(const RequestDefaults& d) { defaults_ = d; }
  // /completion's id_slot records the conversation in `store` (slot_store.h).
  void set_slots(SlotStore* store, int32_t total_slots) {
    slots_ = store;
    total_slots_ = total_slots;
  }
  // image_url parts with http(s) URLs: refused, or fetched by the request's
  // handler under this policy (--allow-remote-images and its limits,
  // image_fetch.h).
  void set_image_fetch(ImageFetchPolicy policy) { image_fetch_ = std::move(policy); }
  // The model's other names and its labels, shown by /v1/models.
  void set_labels(std::vector<std::string> aliases, std::vector<std::string> tags) {
    aliases_ = std::move(aliases);
    tags_ = std::move(tags);
  }

  void Register(httplib::Server* svr);

 private:
  enum class Api { kChat, kCompletion, kNative, kResponses, kMessages };
  void Generate(const httplib::Request& req, const httplib::ContentReader& reader, httplib::Response& res, Api api);

  std::string TokenText(llm_token token) const;
  bool TokenizeText(const std::string& text, bool add_special, std::vector<llm_token>* out) const;
  // A prompt as its tokens spell it, special tokens rendered ("<s> Hello").
  std::string PromptText(const PromptInput& in) const;
  int32_t PromptTokenCount(const PromptInput& in) const;  // 0 when it cannot be tokenized
  // Checks a request for a slot and tokenizes its prompt (false: *err).
  bool TakeSlot(Generation* g, int32_t slot, ApiError* err) const;

  Engine* engine_;
  const chat::Prompter* prompter_;
  std::string model_name_;
  int32_t n_ctx_ = 0;
  int64_t created_;
  bool log_;
  RequestDefaults defaults_;
  std::vector<std::string> aliases_, tags_;
  SlotStore* slots_ = nullptr;
  ImageFetchPolicy image_fetch_ = DefaultImageFetchPolicy();
  int32_t total_slots_ = 0;
  IdleTrim idle_trim_;
};

}  // namespace server
