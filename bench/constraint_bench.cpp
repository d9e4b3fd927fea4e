// The cost of constrained decoding (issue 20): decode time per token on a
// model with and without a JSON-object constraint at batch 1 and batch B
// (runs alternate, so drift in machine load hits both sides alike), the
// uncached mask of the first state (a full trie walk), and compile time of a
// large grammar.
//
//   constraint-bench [model.gguf] [rounds=3] [batch=16] [max_tokens=64] [schema.json] [cold]
//
// With a schema file the constrained side is that JSON Schema request
// (LLM_CONSTRAINT_JSON_SCHEMA) instead of "any JSON object".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "constrain/constraint.h"
#include "constrain/gbnf_parser.h"
#include "constrain/token_trie.h"
#include "llm.h"
#include "model/model.h"

namespace {

using Clock = std::chrono::steady_clock;
std::string g_schema;  // the constrained side's JSON Schema; empty: any JSON object
// "cold": each constrained run gets a schema text of its own (a description
// naming the run), so nothing of an earlier run's masks is reused: the cost a
// schema's first request pays. Otherwise runs repeat one schema, as an
// application does.
bool g_cold = false;
double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

struct RunResult {
  double tpot_ms = 0;  // mean over sequences of the engine's time per output token
  double tokens = 0;   // mean generated tokens per sequence
  int stopped = 0;     // sequences that ended with EOS
  std::string schema;  // the constraint text the run used
  std::vector<std::vector<int32_t>> outputs;  // (batch) generated token ids
};

RunResult RunBatch(llm_ctx* ctx, const char* prompt, int batch, int max_tokens, bool constrained, uint64_t seed) {
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0.8f;
  std::vector<llm_request_id> ids;
  RunResult res;
  for (int i = 0; i < batch; ++i) {
    sp.seed = seed + static_cast<uint64_t>(i);
    llm_request r;
    llm_request_init(&r);
    r.prompt = prompt;
    r.tokenize_flags = LLM_TOKENIZE_PARSE_SPECIAL;
    r.max_tokens = max_tokens;
    r.sampling = &sp;
    // Unconstrained runs ignore EOS so both sides decode about as many
    // tokens at the same batch occupancy.
    r.ignore_eos = constrained ? 0 : 1;
    r.constraint_kind = !constrained ? LLM_CONSTRAINT_NONE
                        : g_schema.empty() ? LLM_CONSTRAINT_JSON_OBJECT
                                           : LLM_CONSTRAINT_JSON_SCHEMA;
    std::string text = g_schema;
    if (g_cold && !text.empty()) text.insert(text.find('{') + 1, "\"description\": \"run " + std::to_string(seed) + "\", ");
    if (constrained && !g_schema.empty()) r.constraint = text.c_str();
    res.schema = text;
    llm_request_id id = 0;
    if (llm_submit(ctx, &r, &id) != LLM_OK) {
      std::fprintf(stderr, "submit: %s\n", llm_last_error());
      std::exit(1);
    }
    ids.push_back(id);
  }
  res.outputs.resize(static_cast<size_t>(batch));
  int finals = 0;
  llm_event ev[64];
  while (finals < batch) {
    ev[0].struct_size = sizeof(llm_event);
    uint32_t got = 0;
    llm_poll(ctx, ev, 64, &got, 1000);
    for (uint32_t k = 0; k < got; ++k) {
      if (ev[k].type == LLM_EVENT_TOKEN) {
        const size_t i = static_cast<size_t>(std::find(ids.begin(), ids.end(), ev[k].request_id) - ids.begin());
        if (i < ids.size()) res.outputs[i].push_back(ev[k].token);
      }
      if (ev[k].type != LLM_EVENT_FINAL) continue;
      ++finals;
      res.tpot_ms += ev[k].metrics.tpot_ms / batch;
      res.tokens += static_cast<double>(ev[k].metrics.generated_tokens) / batch;
      res.stopped += ev[k].finish_reason == LLM_FINISH_STOP;
    }
  }
  return res;
}

// The masking work alone, replayed: the constrained runs' outputs go through
// the engine's constraint path again (ConstraintState::Apply: sync, mask,
// the -inf pass), sequences of one batch interleaved token by token and
// sharing one SharedMatcher as in the engine. Cold: a fresh SharedMatcher per
// run (a schema's first request); warm: one kept across the runs (the same
// schema again). max_tokens: the budget the masks keep to (budget.h), as
// the engine does; kNoBudget: masks without it. Returns ms of masking per
// generated token.
double ReplayMaskMs(const std::vector<RunResult>& runs, const std::shared_ptr<const llm::constrain::TokenTrie>& trie,
                    bool cold, int32_t max_tokens) {
  using namespace llm::constrain;
  std::vector<float> logits(static_cast<size_t>(trie->n_vocab()));
  std::shared_ptr<SharedMatcher> shared;
  double ms = 0;
  size_t tokens = 0;
  for (const RunResult& run : runs) {
    auto program = CompileConstraint(g_schema.empty() ? LLM_CONSTRAINT_JSON_OBJECT : LLM_CONSTRAINT_JSON_SCHEMA,
                                     run.schema, {});
    if (!program.ok()) std::exit(1);
    if (cold || shared == nullptr) shared = std::make_shared<SharedMatcher>(*program);
    std::vector<ConstraintState> states;
    for (size_t i = 0; i < run.outputs.size(); ++i) states.emplace_back(shared, trie, 0, max_tokens);
    for (size_t j = 0;; ++j) {
      bool any = false;
      for (size_t i = 0; i < run.outputs.size(); ++i) {
        const std::vector<int32_t>& out = run.outputs[i];
        if (j >= out.size()) continue;
        any = true;
        const auto t0 = Clock::now();
        states[i].Apply(logits.data(), trie->n_vocab(), std::span<const int32_t>(out.data(), j));
        ms += Ms(t0, Clock::now());
        ++tokens;
      }
      if (!any) break;
    }
  }
  return tokens > 0 ? ms / static_cast<double>(tokens) : 0.0;
}

// A grammar the size of a large JSON Schema's: `n` object rules with eight
// typed properties each, all reachable from root.
std::string LargeGrammar(int n) {
  std::string g = "root ::= obj0\n";
  for (int i = 0; i < n; ++i) {
    g += "obj" + std::to_string(i) + " ::= \"{\" ws";
    for (int p = 0; p < 8; ++p) {
      g += (p ? " \",\" ws " : " ") + std::string("\"\\\"field_") + std::to_string(i) + "_" + std::to_string(p) +
           "\\\"\" ws \":\" ws ";
      if (p == 7 && i + 1 < n) {
        g += "obj" + std::to_string(i + 1);
      } else {
        const char* types[] = {"string", "number", "bool", "\"null\"", "string", "(\"a\" | \"b\" | \"c\")", "number", "string"};
        g += types[p];
      }
      g += " ws";
    }
    g += " \"}\"\n";
  }
  g += "string ::= \"\\\"\" ([^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt])* \"\\\"\"\n"
       "number ::= \"-\"? [0-9]{1,16} (\".\" [0-9]{1,16})?\n"
       "bool ::= \"true\" | \"false\"\n"
       "ws ::= [ \\t\\n]{0,8}\n";
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "models/pypi/SmolLM2-135M-Instruct.Q4_1.gguf";
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  const int big_batch = argc > 3 ? std::atoi(argv[3]) : 16;
  const int max_tokens = argc > 4 ? std::atoi(argv[4]) : 64;
  if (argc > 5) {
    std::ifstream in(argv[5], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", argv[5]);
      return 1;
    }
    g_schema.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  g_cold = argc > 6 && std::string(argv[6]) == "cold";

  // ---- compile time of a large grammar, and the first (uncached) mask.
  for (int n : {50, 200}) {
    const std::string text = LargeGrammar(n);
    double best = 1e9;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = Clock::now();
      auto p = llm::constrain::CompileConstraint(LLM_CONSTRAINT_GRAMMAR, text, {});
      const auto t1 = Clock::now();
      if (!p.ok()) {
        std::fprintf(stderr, "compile: %s\n", p.status().message().c_str());
        return 1;
      }
      best = std::min(best, Ms(t0, t1));
    }
    std::printf("compile: %d object rules, %zu bytes of grammar: %.2f ms (best of 5)\n", n, text.size(), best);
  }
  {
    auto m = llm::Model::Load(model.c_str());
    if (!m.ok()) {
      std::fprintf(stderr, "%s\n", m.status().message().c_str());
      return 1;
    }
    auto t0 = Clock::now();
    auto trie = llm::constrain::TokenTrie::FromTokenizer(*(*m)->tokenizer);
    auto t1 = Clock::now();
    std::printf("token trie: %d tokens, %zu nodes, built in %.1f ms\n", trie->n_vocab(), trie->n_nodes(), Ms(t0, t1));
    auto p = llm::constrain::CompileConstraint(LLM_CONSTRAINT_JSON_OBJECT, "", {});
    llm::constrain::Matcher matcher(*p);
    std::vector<uint64_t> mask;
    const auto in_string = matcher.StepBytes(matcher.Initial(), "{\"");
    t0 = Clock::now();
    trie->ComputeMask(matcher, in_string, &mask);
    t1 = Clock::now();
    const auto t2 = Clock::now();
    trie->ComputeMask(matcher, in_string, &mask);
    const auto t3 = Clock::now();
    std::printf("mask inside a JSON string: first walk %.2f ms, again (transitions memoised) %.2f ms\n", Ms(t0, t1),
                Ms(t2, t3));
  }

  // ---- decode with and without the constraint, alternating.
  llm_ctx_params cp;
  llm_ctx_params_init(&cp);
  cp.model_path = model.c_str();
  llm_ctx* ctx = nullptr;
  if (llm_ctx_create(&cp, &ctx) != LLM_OK) {
    std::fprintf(stderr, "ctx: %s\n", llm_last_error());
    return 1;
  }
  const char* prompt =
      "<|im_start|>user\nList ten animals as a JSON object mapping each name to a short description.<|im_end|>\n"
      "<|im_start|>assistant\n";
  auto model_for_trie = llm::Model::Load(model.c_str());
  if (!model_for_trie.ok()) return 1;
  const auto trie = llm::constrain::TokenTrie::FromTokenizer(*(*model_for_trie)->tokenizer);
  for (int batch : {1, big_batch}) {
    std::vector<RunResult> constrained_runs;
    std::vector<double> plain, constrained;
    double plain_tok = 0, con_tok = 0;
    int stopped = 0;
    for (int r = 0; r < rounds; ++r) {
      const RunResult a = RunBatch(ctx, prompt, batch, max_tokens, false, 100 + r * 64);
      const RunResult b = RunBatch(ctx, prompt, batch, max_tokens, true, 100 + r * 64);
      plain.push_back(a.tpot_ms);
      constrained.push_back(b.tpot_ms);
      plain_tok += a.tokens / rounds;
      con_tok += b.tokens / rounds;
      stopped += b.stopped;
      constrained_runs.push_back(b);
    }
    // Each round's constrained/plain ratio (the two ran back to back, so a
    // load change between rounds cancels), and its median.
    std::vector<double> ratio;
    for (size_t r = 0; r < plain.size(); ++r) ratio.push_back(constrained[r] / plain[r]);
    std::sort(ratio.begin(), ratio.end());
    std::sort(plain.begin(), plain.end());
    std::sort(constrained.begin(), constrained.end());
    const double pm = plain[plain.size() / 2], cm = constrained[constrained.size() / 2];
    std::printf(
        "batch %2d: time per output token, median of %d: plain %.2f ms, constrained %.2f ms (%+.1f%%; median of the "
        "rounds' ratios %+.1f%%); tokens/seq %.1f vs %.1f; constrained runs ending with EOS %d/%d\n",
        batch, rounds, pm, cm, 100.0 * (cm - pm) / pm, 100.0 * (ratio[ratio.size() / 2] - 1.0), plain_tok, con_tok,
        stopped, rounds * batch);
    // Replayed per generated token of a sequence; one engine step serves
    // `batch` sequences, so a step's masking is batch times that, against the
    // plain step's time (tpot: every sequence gets one token per step).
    // Without the budget, with it as the engine ran them (max_tokens: tight
    // when the schema's shortest completion is near it), and with a
    // generous one (1024), alternating, twice.
    const int32_t none = llm::constrain::ConstraintState::kNoBudget;
    for (int rep = 0; rep < 2; ++rep) {
      for (int32_t budget : {none, static_cast<int32_t>(max_tokens), 1024}) {
        const double cold = ReplayMaskMs(constrained_runs, trie, true, budget) * batch;
        const double warm = ReplayMaskMs(constrained_runs, trie, false, budget) * batch;
        std::printf("batch %2d: masking per step, replayed %s: a schema's first request %.3f ms (%.1f%% of plain), "
                    "the same schema again %.3f ms (%.1f%%)\n",
                    batch, budget == none ? "without budget   " : budget == 1024 ? "budget 1024      " : "budget max_tokens", cold, 100.0 * cold / pm, warm,
                    100.0 * warm / pm);
      }
    }
  }
  llm_ctx_destroy(ctx);
  return 0;
}
