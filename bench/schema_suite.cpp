// The JSON Schema suite of issue 20 (tests/data/json_schemas), two ways:
//
//   schema-suite grammar SCHEMA.json...   print each schema's grammar and the
//                                         time to compile it (best of 20)
//   schema-suite run [options] SCHEMA.json...
//       draws --n samples (default 20) per schema at --temperature (1.0) from
//       --model (SmolLM2-135M-Instruct Q4_1) through the C API, one request
//       of n sequences per schema constrained by LLM_CONSTRAINT_JSON_SCHEMA,
//       with a chat-templated prompt asking for JSON, and writes one JSON
//       line per sample to --out: {"schema","index","finish","text"}.
//       Options: --max-tokens (768) --seed (1) --threads (0: all) --out FILE
//       --budget-slack K: each schema's max_tokens is the tokens of its
//       shortest completion through the model's vocabulary (budget.h) + K
//       instead (issue 29's budget acceptance); the line then carries
//       "shortest" and "max_tokens". A schema the library refuses is a
//       line {"schema","refused"} and not a failure.
//
// tools/validate_schema_samples.py checks the lines (parse, validate with
// format checking, finish == "stop"); it can also run this program itself.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "constrain/budget.h"
#include "constrain/constraint.h"
#include "constrain/grammar_text.h"
#include "constrain/json_schema.h"
#include "llm.h"
#include "model/gguf.h"
#include "model/vocab_gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

std::string BaseName(const std::string& path) {
  std::string b = path.substr(path.find_last_of('/') + 1);
  const size_t dot = b.rfind('.');
  return dot == std::string::npos ? b : b.substr(0, dot);
}

int Grammar(const std::vector<std::string>& files) {
  int rc = 0;
  for (const auto& path : files) {
    std::string text;
    if (!ReadFile(path, &text)) {
      std::fprintf(stderr, "%s: cannot read\n", path.c_str());
      return 2;
    }
    double best_ms = 1e30;
    std::string grammar;
    for (int i = 0; i < 20; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      auto g = llm::JsonSchemaToGrammar(text);
      best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (!g.ok()) {
        std::printf("# %s: error %s: %s\n", path.c_str(), llm_status_str(g.status().code()), g.status().message().c_str());
        rc = 1;
        break;
      }
      grammar = *g;
    }
    if (!grammar.empty())
      std::printf("# %s: %zu bytes of grammar, compiled in %.3f ms\n%s", path.c_str(), grammar.size(), best_ms, grammar.c_str());
  }
  return rc;
}

const char* FinishName(int32_t f) {
  switch (f) {
    case LLM_FINISH_STOP: return "stop";
    case LLM_FINISH_LENGTH: return "length";
    case LLM_FINISH_CANCELLED: return "cancelled";
    case LLM_FINISH_ERROR: return "error";
    default: return "none";
  }
}

int Run(int argc, char** argv) {
  std::string model = "models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf", out_path = "schema_samples.jsonl";
  int n = 20, max_tokens = 768, threads = 0, budget_slack = -1;
  float temperature = 1.0f;
  uint64_t seed = 1;
  std::vector<std::string> files;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--model") model = next();
    else if (a == "--n") n = std::atoi(next());
    else if (a == "--max-tokens") max_tokens = std::atoi(next());
    else if (a == "--threads") threads = std::atoi(next());
    else if (a == "--temperature") temperature = static_cast<float>(std::atof(next()));
    else if (a == "--seed") seed = std::strtoull(next(), nullptr, 10);
    else if (a == "--out") out_path = next();
    else if (a == "--budget-slack") budget_slack = std::atoi(next());
    else files.push_back(a);
  }
  // The vocabulary as the engine's mask sees it, for --budget-slack.
  std::shared_ptr<const llm::constrain::TokenTrie> trie;
  if (budget_slack >= 0) {
    auto file = llm::GgufFile::Open(model);
    auto data = file.ok() ? llm::TokenizerDataFromGguf(**file) : llm::StatusOr<llm::TokenizerData>(file.status());
    auto tok = data.ok() ? llm::Tokenizer::Create(std::move(*data)) : llm::StatusOr<std::unique_ptr<llm::Tokenizer>>(data.status());
    if (!tok.ok()) {
      std::fprintf(stderr, "model %s: %s\n", model.c_str(), tok.status().message().c_str());
      return 2;
    }
    trie = llm::constrain::TokenTrie::FromTokenizer(**tok);
  }
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = model.c_str();
  p.n_threads = threads;
  p.n_ctx = max_tokens + 2048;  // room for the prompt (the schema text) and max_tokens (or a budget)
  p.max_seqs = std::max(16, n);
  llm_ctx* ctx = nullptr;
  if (llm_ctx_create(&p, &ctx) != LLM_OK) {
    std::fprintf(stderr, "model %s: %s\n", model.c_str(), llm_last_error());
    return 2;
  }
  std::FILE* out = std::fopen(out_path.c_str(), "w");
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", out_path.c_str());
    llm_ctx_destroy(ctx);
    return 2;
  }
  const auto t_all = std::chrono::steady_clock::now();
  int failures = 0;
  for (const auto& path : files) {
    std::string schema;
    if (!ReadFile(path, &schema)) {
      std::fprintf(stderr, "%s: cannot read\n", path.c_str());
      ++failures;
      continue;
    }
    const std::string ask = "Reply with one JSON value that matches this JSON Schema, and nothing else:\n" + schema;
    llm_chat_message msg = {"user", ask.c_str()};
    std::vector<char> prompt(1 << 16);
    size_t n_prompt = 0;
    if (llm_chat_apply_template(ctx, nullptr, &msg, 1, 1, prompt.data(), prompt.size(), &n_prompt) != LLM_OK) {
      std::fprintf(stderr, "%s: template: %s\n", path.c_str(), llm_last_error());
      ++failures;
      continue;
    }
    const std::string prompt_text(prompt.data(), n_prompt);
    llm_sampling_params sp;
    llm_sampling_params_init(&sp);
    sp.temperature = temperature;
    sp.top_k = 0;  // plain temperature sampling over the allowed tokens
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    sp.seed = seed;
    llm_request r;
    llm_request_init(&r);
    r.prompt = prompt_text.c_str();
    r.tokenize_flags = LLM_TOKENIZE_PARSE_SPECIAL;
    r.max_tokens = max_tokens;
    int32_t shortest = -1;
    if (budget_slack >= 0) {
      auto program = llm::constrain::CompileConstraint(LLM_CONSTRAINT_JSON_SCHEMA, schema, {});
      if (!program.ok()) {
        std::fprintf(out, "{\"schema\":%s,\"refused\":%s}\n", llm::gbnf::JsonString(BaseName(path)).c_str(),
                     llm::gbnf::JsonString(program.status().message()).c_str());
        continue;
      }
      llm::constrain::Matcher m(*program);
      llm::constrain::Budget budget(**program);
      shortest = budget.Tokens(m, *trie, m.Initial());
      if (shortest == llm::constrain::Budget::kNever) {
        std::fprintf(stderr, "%s: no completion through the vocabulary\n", path.c_str());
        ++failures;
        continue;
      }
      r.max_tokens = shortest + budget_slack;
    }
    r.n = n;
    r.sampling = &sp;
    r.constraint_kind = LLM_CONSTRAINT_JSON_SCHEMA;
    r.constraint = schema.c_str();
    llm_request_id id = 0;
    const auto t0 = std::chrono::steady_clock::now();
    if (llm_submit(ctx, &r, &id) != LLM_OK) {
      const std::string why = llm_last_error();
      if (why.find("JSON Schema") != std::string::npos) {  // refused by the compiler: named, not a failure
        std::fprintf(out, "{\"schema\":%s,\"refused\":%s}\n", llm::gbnf::JsonString(BaseName(path)).c_str(),
                     llm::gbnf::JsonString(why).c_str());
        continue;
      }
      std::fprintf(stderr, "%s: submit: %s\n", path.c_str(), why.c_str());
      ++failures;
      continue;
    }
    std::vector<std::string> text(static_cast<size_t>(n));
    std::vector<int32_t> finish(static_cast<size_t>(n), LLM_FINISH_NONE);
    int done = 0, tokens = 0;
    std::vector<llm_event> ev(64);
    while (done < n) {
      for (auto& e : ev) e.struct_size = sizeof(llm_event);
      uint32_t got = 0;
      if (llm_poll(ctx, ev.data(), static_cast<uint32_t>(ev.size()), &got, 1000) != LLM_OK) break;
      for (uint32_t i = 0; i < got; ++i) {
        const llm_event& e = ev[i];
        if (e.request_id != id || e.seq_index < 0 || e.seq_index >= n) continue;
        text[static_cast<size_t>(e.seq_index)].append(e.text, e.text_len);
        if (e.type == LLM_EVENT_TOKEN) ++tokens;
        if (e.type == LLM_EVENT_FINAL) {
          finish[static_cast<size_t>(e.seq_index)] = e.finish_reason;
          if (e.status != LLM_OK) std::fprintf(stderr, "%s #%d: %s\n", path.c_str(), e.seq_index, e.message);
          ++done;
        }
      }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int stops = 0;
    for (int i = 0; i < n; ++i) {
      stops += finish[static_cast<size_t>(i)] == LLM_FINISH_STOP;
      std::fprintf(out, "{\"schema\":%s,\"index\":%d,\"finish\":\"%s\",\"shortest\":%d,\"max_tokens\":%d,\"text\":%s}\n",
                   llm::gbnf::JsonString(BaseName(path)).c_str(), i, FinishName(finish[static_cast<size_t>(i)]), shortest,
                   r.max_tokens, llm::gbnf::JsonString(text[static_cast<size_t>(i)]).c_str());
    }
    std::fflush(out);
    std::printf("%-28s %2d/%d stop  %5d tokens  %6.1f s\n", BaseName(path).c_str(), stops, n, tokens, s);
    std::fflush(stdout);
  }
  std::fclose(out);
  std::printf("total %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count());
  llm_ctx_destroy(ctx);
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "grammar") == 0) return Grammar(std::vector<std::string>(argv + 2, argv + argc));
  if (argc >= 2 && std::strcmp(argv[1], "run") == 0) return Run(argc, argv);
  std::fprintf(stderr, "usage: schema-suite grammar SCHEMA...\n       schema-suite run [--model M] [--n N] [--max-tokens T] [--out F] SCHEMA...\n");
  return 2;
}
