// llm-run: generate text from a prompt, streamed as it is produced.
//
//   llm-run [-m MODEL] [-p PROMPT] [-n N] [--temp T] [--top-k K] [--top-p P]
//           [--min-p M] [--repeat-penalty R] [--seed S] [-t THREADS] [-c CTX]
//           [--stop STR]... [--ignore-eos] [--json] [--chat] [--system TEXT]
//           [--prompt-ids ID,ID,...] [-kv|-ctk|-ctv f16|f32|q8_0|q4_0|fp8_e4m3]
//
// Without -m it runs the model built into the library. --json prints one JSON
// object at the end instead of streaming: prompt_tokens (ids), tokens
// (generated ids), text, finish_reason, ttft_ms, tpot_ms. --chat sends the
// prompt as one user turn (after an optional --system turn) through the
// model's chat template (llm_chat_apply_template: the GGUF's own, or the
// built-in one for its architecture) and prints only the reply.
// --prompt-ids submits those token ids verbatim instead of a text prompt (no
// BOS added): how a reference continuation made from token ids is replayed.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "chat_prompt.h"
#include "cli_common.h"
#include "llm.h"

namespace {

struct Output {
  bool json = false;
  bool done = false;
  std::vector<llm_token> tokens;
  std::string text;
  llm_metrics metrics{};
  int32_t finish_reason = 0;
  llm_status status = LLM_OK;
  std::string message;
};

void OnEvent(const llm_event* ev, void* user_data) {
  auto* out = static_cast<Output*>(user_data);
  out->text.append(ev->text, ev->text_len);
  if (!out->json) {
    std::fwrite(ev->text, 1, ev->text_len, stdout);
    std::fflush(stdout);
  }
  if (ev->type == LLM_EVENT_TOKEN) {
    out->tokens.push_back(ev->token);
  } else {
    out->done = true;
    out->metrics = ev->metrics;
    out->finish_reason = ev->finish_reason;
    out->status = ev->status;
    out->message = ev->message;
  }
}

const char* FinishName(int32_t r) {
  switch (r) {
    case LLM_FINISH_STOP: return "stop";
    case LLM_FINISH_LENGTH: return "length";
    case LLM_FINISH_CANCELLED: return "cancelled";
    case LLM_FINISH_ERROR: return "error";
    default: return "none";
  }
}

[[noreturn]] void Usage() {
  std::fprintf(stderr,
               "usage: llm-run [-m MODEL] [-p PROMPT] [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p M]\n"
               "               [--repeat-penalty R] [--seed S] [-t THREADS] [-c CTX] [--stop STR]...\n"
               "               [--ignore-eos] [--json] [--chat] [--system TEXT] [--prompt-ids ID,ID,...]\n"
               "               [-kv|-ctk|-ctv f16|f32|q8_0|q4_0|fp8_e4m3] [-ngl N|auto|all] [--fit on|off]\n"
               "  -kv TYPE                KV cache element type of K and V; -ctk / -ctv: K's and V's apart\n"
               "                          (-ctk alone sets both; types that differ: CPU backend only)\n"
               "  -ngl, --n-gpu-layers N  with the CUDA backend: the first N layers on the GPU, the rest on the CPU\n"
               "                          (default all; 0: none, the CPU backend; auto: as many as fit the GPUs'\n"
               "                          free memory with the KV cache for -c tokens, MoE experts to host memory\n"
               "                          first, the CPU backend when none fits; the choice goes to stderr)\n"
               "  --fit on|off            on: -ngl auto unless -ngl is given; off: auto means all\n"
               "  -ts, --tensor-split A,B,...  each GPU's share of those layers (default: by free memory)\n"
               "  -mg, --main-gpu N       run them on GPU N alone (default -1: split over every GPU)\n"
               "  -ncmoe, --n-cpu-moe N   CUDA, Mixture of Experts: the experts of the first N MoE layers in host\n"
               "                          memory (CPU or copied to a device cache per step, by measured cost;\n"
               "                          one GPU only: with several, set -mg)\n"
               "  -cmoe, --cpu-moe        every MoE layer's experts in host memory\n"
               "  --moe-cache-mib N       device expert cache for them (default: one layer's experts)\n");
  std::exit(2);
}

// The prompt as a chat: [system,] user, rendered with the model's template and
// the assistant-turn opener. Sets the tokenize flags the rendering needs:
// special tokens parsed, BOS added unless the template wrote it. False (with
// the message printed) when the model has no template.
bool ChatPrompt(llm_ctx* ctx, const std::string& system, std::string* prompt, uint32_t* flags) {
  // The renderer llm-chat and llm-server use (chat_prompt.h), so the three
  // send a model the same prompt (today's date_string included).
  chat::Prompter prompter;
  std::string error;
  if (!prompter.Init(ctx, "", &error)) {
    std::fprintf(stderr, "llm-run: %s\n", error.c_str());
    return false;
  }
  if (prompter.fallback()) {
    std::fprintf(stderr, "llm-run: --chat: the model has no chat template (LLM_ERR_UNSUPPORTED)\n");
    return false;
  }
  std::vector<chat::Message> msgs;
  if (!system.empty()) msgs.push_back({"system", system});
  msgs.push_back({"user", *prompt});
  std::string text;
  if (llm_status s = prompter.Render(msgs, &text, flags, &error); s != LLM_OK) {
    std::fprintf(stderr, "llm-run: chat template: %s: %s\n", llm_status_str(s), error.c_str());
    return false;
  }
  *prompt = std::move(text);
  return true;
}

// "1,2,3" -> ids; false on anything else (empty, a sign, a non-digit, overflow).
bool ParseIds(const char* text, std::vector<llm_token>* ids) {
  ids->clear();
  const char* p = text;
  while (*p != '\0') {
    if (*p < '0' || *p > '9') return false;
    int64_t v = 0;
    for (; *p >= '0' && *p <= '9'; ++p) {
      v = v * 10 + (*p - '0');
      if (v > INT32_MAX) return false;
    }
    ids->push_back(static_cast<llm_token>(v));
    if (*p == ',' && p[1] != '\0') ++p;  // a trailing comma is malformed too
    else if (*p != '\0') return false;
  }
  return !ids->empty();
}

}  // namespace

int main(int argc, char** argv) {
  llm_ctx_params params;
  llm_ctx_params_init(&params);
  llm_sampling_params sampling;
  llm_sampling_params_init(&sampling);
  llm_request req;
  llm_request_init(&req);
  std::string prompt = "Once upon a time";
  std::string system;
  bool chat = false;
  std::vector<const char*> stops;
  std::vector<llm_token> prompt_ids;
  bool use_ids = false;
  Output out;
  int32_t kv_both = 0, kv_k = 0, kv_v = 0;  // -kv, -ctk, -ctv
  bool ngl_given = false;
  int fit = -1;  // --fit: -1 not given

  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto num = [&] { ++i; return cli::NumberArg(a.c_str(), v); };
    if (a == "-m" || a == "--model") { if (!v) Usage(); params.model_path = v; ++i; }
    else if (a == "-p" || a == "--prompt") { if (!v) Usage(); prompt = v; ++i; }
    else if (a == "-n" || a == "--n-predict") req.max_tokens = static_cast<int32_t>(num());
    else if (a == "--temp") sampling.temperature = static_cast<float>(num());
    else if (a == "--top-k") sampling.top_k = static_cast<int32_t>(num());
    else if (a == "--top-p") sampling.top_p = static_cast<float>(num());
    else if (a == "--min-p") sampling.min_p = static_cast<float>(num());
    else if (a == "--repeat-penalty") sampling.repetition_penalty = static_cast<float>(num());
    else if (a == "--seed") { if (!v) Usage(); sampling.seed = std::strtoull(v, nullptr, 10); ++i; }
    else if (a == "-t" || a == "--threads") params.n_threads = static_cast<int32_t>(num());
    else if (a == "-c" || a == "--ctx-size") params.n_ctx = static_cast<int32_t>(num());
    else if (a == "-kv" || a == "--kv-type") { kv_both = cli::KvTypeArg(a.c_str(), v); ++i; }
    else if (a == "-ctk" || a == "--cache-type-k") { kv_k = cli::KvTypeArg(a.c_str(), v); ++i; }
    else if (a == "-ctv" || a == "--cache-type-v") { kv_v = cli::KvTypeArg(a.c_str(), v); ++i; }
    else if (a == "-ngl" || a == "--n-gpu-layers" || a == "--gpu-layers") {
      params.n_gpu_layers = cli::GpuLayersArg(a.c_str(), v);
      ngl_given = true;
      ++i;
    }
    else if (a == "-fit" || a == "--fit") { fit = cli::FitArg(a.c_str(), v); ++i; }
    else if (a == "-ts" || a == "--tensor-split") { cli::TensorSplitArg(a.c_str(), v, params.tensor_split); ++i; }
    else if (a == "-mg" || a == "--main-gpu") params.main_gpu = static_cast<int32_t>(num());
    else if (a == "-ncmoe" || a == "--n-cpu-moe") params.n_cpu_moe = static_cast<int32_t>(num());
    else if (a == "-cmoe" || a == "--cpu-moe") params.n_cpu_moe = -1;
    else if (a == "--moe-cache-mib") params.moe_cache_bytes = static_cast<uint64_t>(std::max<long long>(0, num())) << 20;
    else if (a == "--stop") { if (!v) Usage(); stops.push_back(v); ++i; }
    else if (a == "--ignore-eos") req.ignore_eos = 1;
    else if (a == "--json") out.json = true;
    else if (a == "--chat") chat = true;
    else if (a == "--system") { if (!v) Usage(); system = v; chat = true; ++i; }
    else if (a == "--prompt-ids") { if (!v || !ParseIds(v, &prompt_ids)) Usage(); use_ids = true; ++i; }
    else Usage();
  }
  if (use_ids && chat) Usage();
  params.n_gpu_layers = cli::ApplyFit(params.n_gpu_layers, ngl_given, fit);
  cli::ApplyKvTypes(kv_both, kv_k, kv_v, &params);

  llm_ctx* ctx = nullptr;
  if (cli::Failed(llm_ctx_create(&params, &ctx), "llm_ctx_create")) return 1;
  if (chat && !ChatPrompt(ctx, system, &prompt, &req.tokenize_flags)) {
    llm_ctx_destroy(ctx);
    return 1;
  }

  if (use_ids) {
    req.prompt = nullptr;
    req.prompt_tokens = prompt_ids.data();
    req.n_prompt_tokens = static_cast<int32_t>(prompt_ids.size());
  } else {
    req.prompt = prompt.c_str();
  }
  req.sampling = &sampling;
  req.stop = stops.empty() ? nullptr : stops.data();
  req.n_stop = static_cast<int32_t>(stops.size());
  req.callback = OnEvent;
  req.user_data = &out;
  llm_request_id id = 0;
  if (cli::Failed(llm_submit(ctx, &req, &id), "llm_submit")) {
    llm_ctx_destroy(ctx);
    return 1;
  }
  if (!out.json && !chat && !use_ids) {
    std::fputs(prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  while (!out.done) {
    uint32_t n = 0;
    if (cli::Failed(llm_poll(ctx, nullptr, 0, &n, 1000), "llm_poll")) break;
  }

  if (out.json) {
    std::string j = "{\"prompt_tokens\": [";
    if (!use_ids) prompt_ids = cli::Tokenize(ctx, prompt, req.tokenize_flags);
    for (size_t k = 0; k < prompt_ids.size(); ++k) j += (k ? ", " : "") + std::to_string(prompt_ids[k]);
    j += "], \"tokens\": [";
    for (size_t k = 0; k < out.tokens.size(); ++k) j += (k ? ", " : "") + std::to_string(out.tokens[k]);
    j += "], \"text\": ";
    cli::JsonString(out.text, &j);
    char buf[256];
    std::snprintf(buf, sizeof buf, ", \"finish_reason\": \"%s\", \"ttft_ms\": %.4f, \"tpot_ms\": %.4f}",
                  FinishName(out.finish_reason), out.metrics.ttft_ms, out.metrics.tpot_ms);
    j += buf;
    std::puts(j.c_str());
  } else {
    std::fputs("\n", stdout);
    std::fflush(stdout);
    std::fprintf(stderr, "\n[%s] prompt %d tokens, generated %d; TTFT %.2f ms, TPOT %.3f ms (%.0f tok/s)\n",
                 FinishName(out.finish_reason), out.metrics.prompt_tokens, out.metrics.generated_tokens,
                 out.metrics.ttft_ms, out.metrics.tpot_ms, out.metrics.tpot_ms > 0 ? 1000.0 / out.metrics.tpot_ms : 0.0);
  }
  if (out.status != LLM_OK) std::fprintf(stderr, "error: %s: %s\n", llm_status_str(out.status), out.message.c_str());
  llm_ctx_destroy(ctx);
  return out.status == LLM_OK ? 0 : 1;
}
