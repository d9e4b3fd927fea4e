// The HTTP endpoints: OpenAI's /v1/chat/completions, /v1/completions and
// /v1/models, plus /v1/stats (llm_get_stats as JSON), /metrics (the same in
// Prometheus' text format) and /health.
#pragma once

#include <cstdint>
#include <string>

#include "../chat_prompt.h"
#include "access.h"
#include "engine.h"
#include "idle_trim.h"

namespace httplib {
class Server;
}

namespace server {

// Puts `policy` (access.h) in front of every route: a request it refuses is
// answered 401 or 403 before its body is read.
void InstallAccessCheck(httplib::Server* svr, AccessPolicy policy);

class Routes {
 public:
  // engine and prompter must outlive the server the routes are registered on.
  Routes(Engine* engine, const chat::Prompter* prompter, std::string model_name, bool log);

  void Register(httplib::Server* svr);

 private:
  std::string TokenText(llm_token token) const;

  Engine* engine_;
  const chat::Prompter* prompter_;
  std::string model_name_;
  int32_t n_ctx_ = 0;
  int64_t created_;
  bool log_;
  IdleTrim idle_trim_;
};

}  // namespace server
