// Speculative decoding at batch 1 through the public C API: greedy decode
// tokens/s with each proposer against no speculation, and acceptance.
//
//   spec-bench [-m MODEL] [-t THREADS] [-n TOKENS] [-k K] [--draft DRAFT.gguf]
//              [--self-layers L] [--repeat R]
//
// Workloads: "story" (the prompt "Once upon a time", TOKENS generated) and
// "repeat" (a prompt that holds a passage the continuation repeats: the
// model's own greedy story, its first half as the prompt).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llm.h"

namespace {

struct Run {
  double seconds = 0;
  int tokens = 0;
  llm_stats stats{};
  std::vector<llm_token> out;
};

llm_ctx* Create(const char* model, int threads, const char* draft, int self_layers, int k) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = model;
  p.n_threads = threads;
  p.draft_model_path = draft;
  p.self_draft_layers = self_layers;
  p.spec_k = k;
  llm_ctx* ctx = nullptr;
  if (llm_ctx_create(&p, &ctx) != LLM_OK) {
    std::fprintf(stderr, "llm_ctx_create: %s\n", llm_last_error());
    std::exit(1);
  }
  return ctx;
}

Run Generate(llm_ctx* ctx, const std::vector<llm_token>& prompt, int n, int32_t mode, int repeat) {
  Run run;
  for (int rep = 0; rep < repeat; ++rep) {
    llm_sampling_params sp;
    llm_sampling_params_init(&sp);
    sp.temperature = 0;
    llm_request r;
    llm_request_init(&r);
    r.prompt_tokens = prompt.data();
    r.n_prompt_tokens = static_cast<int32_t>(prompt.size());
    r.max_tokens = n;
    r.ignore_eos = 1;
    r.sampling = &sp;
    r.spec_mode = mode;
    r.cache_salt = static_cast<uint64_t>(rep) + 1000 * static_cast<uint64_t>(mode);  // no prefix-cache reuse
    const auto t0 = std::chrono::steady_clock::now();
    llm_request_id id;
    if (llm_submit(ctx, &r, &id) != LLM_OK) {
      std::fprintf(stderr, "llm_submit: %s\n", llm_last_error());
      std::exit(1);
    }
    std::vector<llm_token> out;
    llm_event ev[64];
    bool done = false;
    while (!done) {
      uint32_t got = 0;
      ev[0].struct_size = sizeof(llm_event);
      llm_poll(ctx, ev, 64, &got, 100);
      for (uint32_t i = 0; i < got; ++i) {
        if (ev[i].type == LLM_EVENT_TOKEN) out.push_back(ev[i].token);
        if (ev[i].type == LLM_EVENT_FINAL) done = true;
      }
    }
    run.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    run.tokens += static_cast<int>(out.size());
    run.out = out;
  }
  run.stats.struct_size = sizeof(llm_stats);
  llm_get_stats(ctx, &run.stats);
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = std::string(LLM_SOURCE_DIR) + "/models/stories260K-f32.gguf";
  std::string draft = std::string(LLM_SOURCE_DIR) + "/models/stories260K-f16.gguf";
  int threads = 2, n = 200, k = 4, repeat = 5;
  std::vector<int> self_layers = {1, 2, 3, 4};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "-m") model = v, ++i;
    else if (a == "-t") threads = std::atoi(v), ++i;
    else if (a == "-n") n = std::atoi(v), ++i;
    else if (a == "-k") k = std::atoi(v), ++i;
    else if (a == "--draft") draft = v, ++i;
    else if (a == "--self-layers") self_layers = {std::atoi(v)}, ++i;
    else if (a == "--repeat") repeat = std::atoi(v), ++i;
    else {
      std::fprintf(stderr, "usage: spec-bench [-m MODEL] [-t N] [-n TOKENS] [-k K] [--draft GGUF] [--self-layers L] [--repeat R]\n");
      return 2;
    }
  }
  const std::vector<llm_token> story = {1, 403, 407, 261, 378};  // "Once upon a time"
  // The repetition workload: the model's own greedy story; the first half
  // is the prompt, the second half (which loops back over the first) is generated.
  std::vector<llm_token> repeat_prompt = story;
  {
    llm_ctx* ctx = Create(model.c_str(), threads, nullptr, 0, k);
    Run r = Generate(ctx, story, 2 * n, LLM_SPEC_OFF, 1);
    repeat_prompt.insert(repeat_prompt.end(), r.out.begin(), r.out.begin() + n);
    llm_ctx_destroy(ctx);
  }

  struct Setup {
    std::string name;
    const char* draft;
    int self_layers;
    int32_t mode;
  };
  std::vector<Setup> setups = {{"off", nullptr, 0, LLM_SPEC_OFF}, {"ngram", nullptr, 0, LLM_SPEC_NGRAM},
                               {"draft " + draft.substr(draft.rfind('/') + 1), draft.c_str(), 0, LLM_SPEC_DRAFT}};
  for (int l : self_layers) setups.push_back({"self-draft " + std::to_string(l), nullptr, l, LLM_SPEC_DRAFT});

  std::printf("| workload | proposer | k | tokens/s | speedup | accepted / proposed | acceptance | tokens per target pass |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const auto& [wname, prompt] : {std::pair{"story", story}, std::pair{"repeat", repeat_prompt}}) {
    double base = 0;
    std::vector<llm_token> ref;
    for (const Setup& s : setups) {
      llm_ctx* ctx = Create(model.c_str(), threads, s.draft, s.self_layers, k);
      Generate(ctx, prompt, 16, s.mode, 1);  // warm-up
      llm_stats before{};
      before.struct_size = sizeof before;
      llm_get_stats(ctx, &before);
      Run r = Generate(ctx, prompt, n, s.mode, repeat);
      const double tps = r.tokens / r.seconds;
      if (s.mode == LLM_SPEC_OFF) {
        base = tps;
        ref = r.out;
      } else if (r.out != ref) {
        std::fprintf(stderr, "MISMATCH: %s output differs from the non-speculative output\n", s.name.c_str());
        return 1;
      }
      const double prop = double(r.stats.draft_tokens_proposed - before.draft_tokens_proposed);
      const double acc = double(r.stats.draft_tokens_accepted - before.draft_tokens_accepted);
      const double rounds = double(r.stats.spec_rounds - before.spec_rounds);
      std::printf("| %s | %s | %d | %.0f | %.2fx | %.0f / %.0f | %s | %s |\n", wname, s.name.c_str(),
                  s.mode == LLM_SPEC_OFF ? 0 : k, tps, tps / base, acc, prop,
                  prop > 0 ? std::to_string(acc / prop).substr(0, 5).c_str() : "-",
                  rounds > 0 ? std::to_string(1 + acc / rounds).substr(0, 4).c_str() : "1");
      llm_ctx_destroy(ctx);
    }
  }
  return 0;
}
