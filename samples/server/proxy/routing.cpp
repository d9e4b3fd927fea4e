#include "proxy/routing.h"

namespace proxy {

json PrefillBody(const json& request, Api api) {
  json b = request;
  b["stream"] = false;
  b.erase("stream_options");
  if (api == Api::kResponses) {
    b["max_output_tokens"] = 1;
  } else {
    b["max_tokens"] = 1;
    if (b.contains("max_completion_tokens")) b["max_completion_tokens"] = 1;
  }
  b.erase("min_tokens");
  b.erase("min_completion_tokens");
  b["kv_transfer_params"] = {{"do_remote_decode", true},  {"do_remote_prefill", false},
                             {"remote_engine_id", nullptr}, {"remote_block_ids", nullptr},
                             {"remote_host", nullptr},      {"remote_port", nullptr}};
  return b;
}

json DecodeBody(const json& request, const json& prefill_answer) {
  json b = request;
  if (prefill_answer.is_object() && prefill_answer.contains("kv_transfer_params") &&
      prefill_answer["kv_transfer_params"].is_object())
    b["kv_transfer_params"] = prefill_answer["kv_transfer_params"];
  else
    b.erase("kv_transfer_params");
  return b;
}

bool Splittable(const json& request) {
  if (!request.is_object()) return false;
  if (request.contains("n") && !(request["n"].is_number_integer() && request["n"].get<int64_t>() == 1)) return false;
  if (request.contains("prompt")) {
    const json& p = request["prompt"];
    if (p.is_array() && !p.empty() && !p[0].is_number_integer() && p.size() != 1) return false;  // several prompts
  }
  return true;
}

}  // namespace proxy
