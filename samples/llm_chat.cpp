// llm-chat: an interactive chat over the model's chat template.
//
//   llm-chat [-m MODEL] [-t THREADS] [-c CTX] [-n MAX_TOKENS] [--temp T] [--top-p P] [--top-k K]
//            [--min-p M] [--seed S] [-s SYSTEM] [--template FILE] [-ngl N] [-v]
//
// Reads one user turn per line from stdin (a terminal or a pipe; a line
// ending in '\' continues on the next), renders the whole conversation with
// llm_chat_apply_template, and streams the reply to stdout as it is
// generated. The history is kept across turns, so each turn re-submits the
// conversation and the prefix cache serves everything but the new text.
//   /reset   clears the history (the system prompt stays)
//   /quit    leaves (so does end of input)
// Ctrl-C during a reply stops that reply; at the prompt it exits.
//
// Without -m it uses models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf when that
// file is there (scripts/fetch-models.sh fetches it), else the built-in
// stories260K model, which has no chat template: it gets a plain
// "user: ... / assistant:" transcript, and a notice says so.
//
// -v prints one line per turn on stderr: prompt tokens (cached), generated
// tokens, finish reason and speed.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "chat_prompt.h"
#include "cli_common.h"
#include "llm.h"

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

void OnSigint(int) { g_interrupted = 1; }

struct Reply {
  std::string text;
  bool done = false;
  int32_t finish_reason = LLM_FINISH_NONE;
  llm_status status = LLM_OK;
  std::string message;
  llm_metrics metrics{};
};

void OnEvent(const llm_event* ev, void* user_data) {
  auto* r = static_cast<Reply*>(user_data);
  std::fwrite(ev->text, 1, ev->text_len, stdout);
  std::fflush(stdout);
  r->text.append(ev->text, ev->text_len);
  if (ev->type == LLM_EVENT_FINAL) {
    r->done = true;
    r->finish_reason = ev->finish_reason;
    r->status = ev->status;
    r->message = ev->message;
    r->metrics = ev->metrics;
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

[[noreturn]] void Usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: llm-chat [-m MODEL] [-t THREADS] [-c CTX] [-n MAX_TOKENS] [--temp T] [--top-p P]\n"
               "                [--top-k K] [--min-p M] [--seed S] [-s SYSTEM] [--template FILE] [-ngl N]\n"
               "                [-kv|-ctk|-ctv f16|f32|q8_0|q4_0|fp8_e4m3] [-v]\n"
               "  -m, --model PATH      GGUF model (default: %s if present,\n"
               "                        else the built-in stories260K)\n"
               "  -t, --threads N       CPU threads (default: all cores)\n"
               "  -c, --ctx-size N      context length (default: the model's)\n"
               "  -n, --max-tokens N    longest reply in tokens (default 512)\n"
               "  --temp T              temperature, 0 = greedy (default 0.7)\n"
               "  --top-p P, --top-k K, --min-p M, --seed S   sampling (library defaults)\n"
               "  -s, --system TEXT     system prompt\n"
               "  --template FILE       Jinja chat template replacing the model's\n"
               "  -ngl, --n-gpu-layers N  with the CUDA backend: the first N layers on the GPU, the rest\n"
               "                        on the CPU (default all; 0: none; auto: as many as fit)\n"
               "  -kv TYPE              KV cache element type of K and V (default: the backend's)\n"
               "  -ctk, --cache-type-k TYPE, -ctv, --cache-type-v TYPE   K's and V's apart (-ctk alone\n"
               "                        sets both; types that differ: CPU and CUDA)\n"
               "  -v, --verbose         per-turn token counts and speed on stderr\n"
               "commands: /reset clears the history, /quit leaves\n",
               chat::kDefaultChatModel);
  std::exit(code);
}

// One line of input; a trailing '\' joins the next line. False at end of input.
bool ReadTurn(bool interactive, std::string* out) {
  out->clear();
  std::string line;
  for (;;) {
    if (interactive) {
      std::fputs(out->empty() ? "> " : ". ", stdout);
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) return !out->empty();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      *out += line + "\n";
      continue;
    }
    *out += line;
    return true;
  }
}

int32_t CountTokens(llm_ctx* ctx, const std::string& text, uint32_t flags) {
  int32_t n = 0;
  llm_status s = llm_tokenize(ctx, text.data(), text.size(), flags, nullptr, 0, &n);
  return s == LLM_OK || s == LLM_ERR_BUFFER_TOO_SMALL ? n : -1;
}

}  // namespace

int main(int argc, char** argv) {
  llm_ctx_params params;
  llm_ctx_params_init(&params);
  params.max_seqs = 1;  // one conversation: a KV pool for one full-length sequence
  llm_sampling_params sampling;
  llm_sampling_params_init(&sampling);
  sampling.temperature = 0.7f;
  int32_t max_tokens = 512;
  std::string model, system_prompt, template_text;
  bool model_given = false, verbose = false;
  int32_t kv_both = 0, kv_k = 0, kv_v = 0;  // -kv, -ctk, -ctv

  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto str = [&]() -> std::string {
      if (v == nullptr) Usage(2);
      ++i;
      return v;
    };
    auto num = [&] { ++i; return cli::NumberArg(a.c_str(), v); };
    if (a == "-m" || a == "--model") { model = str(); model_given = true; }
    else if (a == "-t" || a == "--threads") params.n_threads = static_cast<int32_t>(num());
    else if (a == "-c" || a == "--ctx-size") params.n_ctx = static_cast<int32_t>(num());
    else if (a == "-ngl" || a == "--n-gpu-layers") { params.n_gpu_layers = cli::GpuLayersArg(a.c_str(), v); ++i; }
    else if (a == "-n" || a == "--max-tokens") max_tokens = static_cast<int32_t>(num());
    else if (a == "--temp") sampling.temperature = static_cast<float>(num());
    else if (a == "--top-p") sampling.top_p = static_cast<float>(num());
    else if (a == "--top-k") sampling.top_k = static_cast<int32_t>(num());
    else if (a == "--min-p") sampling.min_p = static_cast<float>(num());
    else if (a == "--seed") sampling.seed = std::strtoull(str().c_str(), nullptr, 10);
    else if (a == "-s" || a == "--system") system_prompt = str();
    else if (a == "--template") {
      std::ifstream f(str(), std::ios::binary);
      if (!f) { std::fprintf(stderr, "llm-chat: cannot read %s\n", argv[i]); return 2; }
      std::ostringstream ss;
      ss << f.rdbuf();
      template_text = ss.str();
    }
    else if (a == "-kv" || a == "--kv-type") { kv_both = cli::KvTypeArg(a.c_str(), v); ++i; }
    else if (a == "-ctk" || a == "--cache-type-k") { kv_k = cli::KvTypeArg(a.c_str(), v); ++i; }
    else if (a == "-ctv" || a == "--cache-type-v") { kv_v = cli::KvTypeArg(a.c_str(), v); ++i; }
    else if (a == "-v" || a == "--verbose") verbose = true;
    else if (a == "-h" || a == "--help") Usage(0);
    else Usage(2);
  }
  cli::ApplyKvTypes(kv_both, kv_k, kv_v, &params);
  if (!model_given) model = chat::FindDefaultModel();
  params.model_path = model.empty() ? nullptr : model.c_str();

  llm_ctx* ctx = nullptr;
  if (cli::Failed(llm_ctx_create(&params, &ctx), "llm_ctx_create")) return 1;
  llm_model_info info{};
  info.struct_size = sizeof info;
  llm_model_get_info(ctx, &info);
  const std::string name = chat::ModelName(model);

  chat::Prompter prompter;
  std::string error;
  if (!prompter.Init(ctx, template_text, &error)) {
    std::fprintf(stderr, "llm-chat: %s\n", error.c_str());
    llm_ctx_destroy(ctx);
    return 1;
  }
  const bool interactive = isatty(STDIN_FILENO) != 0;
  if (prompter.fallback()) {
    std::fprintf(stderr,
                 "llm-chat: %s has no chat template; using a plain 'user: ... / assistant:' transcript.\n"
                 "          It is not an instruction-tuned model, so expect stories, not answers\n"
                 "          (--template FILE supplies a template; scripts/fetch-models.sh fetches SmolLM2).\n",
                 name.c_str());
  }
  if (interactive) std::fprintf(stderr, "llm-chat: %s, context %d tokens. /reset clears, /quit leaves.\n",
                                name.c_str(), info.n_ctx);

  std::vector<chat::Message> history;
  auto reset = [&] {
    history.clear();
    if (!system_prompt.empty()) history.push_back({"system", system_prompt});
  };
  reset();
  const size_t first_turn = history.size();

  std::string line, prompt;
  int rc = 0;
  while (ReadTurn(interactive, &line)) {
    if (line == "/quit" || line == "/exit") break;
    if (line == "/reset") {
      reset();
      std::fprintf(stderr, "(conversation cleared)\n");
      continue;
    }
    if (line == "/help") {
      std::fprintf(stderr, "/reset clears the history, /quit leaves; end a line with '\\' to continue it\n");
      continue;
    }
    if (line.empty()) continue;
    if (line[0] == '/') {
      std::fprintf(stderr, "unknown command %s (/reset, /quit, /help)\n", line.c_str());
      continue;
    }
    history.push_back({"user", line});

    // Render; drop the oldest exchanges while the prompt plus a full reply
    // would not fit the context (the system prompt and this turn stay).
    uint32_t flags = 0;
    llm_status s = LLM_OK;
    for (;;) {
      s = prompter.Render(history, &prompt, &flags, &error);
      if (s != LLM_OK) break;
      const int32_t n = CountTokens(ctx, prompt, flags);
      if (n < 0 || n + max_tokens <= info.n_ctx || history.size() - first_turn < 3) break;
      history.erase(history.begin() + static_cast<std::ptrdiff_t>(first_turn),
                    history.begin() + static_cast<std::ptrdiff_t>(first_turn) + 2);
      if (verbose) std::fprintf(stderr, "(oldest exchange dropped to fit the context)\n");
    }
    if (s != LLM_OK) {
      std::fprintf(stderr, "chat template: %s: %s\n", llm_status_str(s), error.c_str());
      history.pop_back();
      continue;
    }

    Reply reply;
    llm_request req;
    llm_request_init(&req);
    req.prompt = prompt.c_str();
    req.tokenize_flags = flags;
    req.max_tokens = max_tokens;
    req.sampling = &sampling;
    req.stop = prompter.stops().empty() ? nullptr : prompter.stops().data();
    req.n_stop = static_cast<int32_t>(prompter.stops().size());
    req.callback = OnEvent;
    req.user_data = &reply;
    llm_request_id id = 0;
    if (cli::Failed(llm_submit(ctx, &req, &id), "llm_submit")) {
      history.pop_back();
      continue;
    }
    // Ctrl-C stops this reply only.
    g_interrupted = 0;
    struct sigaction sa {}, old {};
    sa.sa_handler = OnSigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    bool cancel_sent = false;
    while (!reply.done) {
      uint32_t got = 0;
      if (cli::Failed(llm_poll(ctx, nullptr, 0, &got, 100), "llm_poll")) break;
      if (g_interrupted && !cancel_sent) {
        llm_cancel(ctx, id);
        cancel_sent = true;
      }
    }
    sigaction(SIGINT, &old, nullptr);
    std::fputs("\n", stdout);
    std::fflush(stdout);

    if (verbose) {
      const llm_metrics& m = reply.metrics;
      std::fprintf(stderr, "[prompt %d tokens (%d cached), generated %d, %s, %.1f tok/s]\n", m.prompt_tokens,
                   m.cached_prompt_tokens, m.generated_tokens, FinishName(reply.finish_reason),
                   m.tpot_ms > 0 ? 1000.0 / m.tpot_ms : 0.0);
    }
    if (!reply.done || reply.finish_reason == LLM_FINISH_ERROR) {
      std::fprintf(stderr, "llm-chat: generation failed: %s: %s\n", llm_status_str(reply.status),
                   reply.message.c_str());
      history.pop_back();
      if (!reply.done) { rc = 1; break; }
      continue;
    }
    if (reply.finish_reason == LLM_FINISH_CANCELLED) std::fprintf(stderr, "(reply stopped)\n");
    history.push_back({"assistant", reply.text});
  }
  llm_ctx_destroy(ctx);
  return rc;
}
