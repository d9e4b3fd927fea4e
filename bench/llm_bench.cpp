// llm-bench: throughput through the public C API, engine thread included.
//
//   llm-bench [-m MODEL] [-t THREADS] [-r REPEATS] [--decode N] [--prefill P] [--streams S]
//
// decode:  one stream, greedy, N tokens after a 5-token prompt; tok/s from
//          the request's mean TPOT (time per output token after the first).
// prefill: one P-token prompt, 1 generated token; tok/s = P / TTFT, where TTFT
//          runs from llm_submit to the first token (queueing included).
// batch:   S streams at once, N/4 tokens each; generated tokens / wall time.
// Each figure is the median of R runs in this process.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llm.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool Check(llm_status s, const char* what) {
  if (s == LLM_OK) return true;
  std::fprintf(stderr, "%s: %s: %s\n", what, llm_status_str(s), llm_last_error());
  std::exit(1);
}

// Submits `reqs` and waits for all of them; returns their final metrics.
std::vector<llm_metrics> RunAll(llm_ctx* ctx, std::vector<llm_request>& reqs) {
  for (auto& r : reqs) {
    llm_request_id id;
    Check(llm_submit(ctx, &r, &id), "llm_submit");
  }
  std::vector<llm_metrics> out;
  std::vector<llm_event> ev(64);
  while (out.size() < reqs.size()) {
    uint32_t n = 0;
    ev[0].struct_size = sizeof(llm_event);
    Check(llm_poll(ctx, ev.data(), static_cast<uint32_t>(ev.size()), &n, 1000), "llm_poll");
    for (uint32_t i = 0; i < n; ++i) {
      if (ev[i].type != LLM_EVENT_FINAL) continue;
      if (ev[i].status != LLM_OK) {
        std::fprintf(stderr, "request failed: %s\n", ev[i].message);
        std::exit(1);
      }
      out.push_back(ev[i].metrics);
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.n_threads = 2;
  int repeats = 7, n_decode = 256, n_prefill = 128, n_streams = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "-m") p.model_path = argv[i + 1];
    else if (a == "-t") p.n_threads = std::atoi(argv[i + 1]);
    else if (a == "-r") repeats = std::atoi(argv[i + 1]);
    else if (a == "--decode") n_decode = std::atoi(argv[i + 1]);
    else if (a == "--prefill") n_prefill = std::atoi(argv[i + 1]);
    else if (a == "--streams") n_streams = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  llm_ctx* ctx = nullptr;
  Check(llm_ctx_create(&p, &ctx), "llm_ctx_create");
  llm_model_info info{};
  info.struct_size = sizeof info;
  Check(llm_model_get_info(ctx, &info), "llm_model_get_info");

  llm_sampling_params greedy;
  llm_sampling_params_init(&greedy);
  greedy.temperature = 0.0f;

  // Warm-up: page in the weights, size the buffers.
  {
    llm_request r;
    llm_request_init(&r);
    r.prompt = "Once upon a time";
    r.max_tokens = 32;
    r.sampling = &greedy;
    std::vector<llm_request> rs{r};
    RunAll(ctx, rs);
  }

  std::vector<double> decode, prefill, batch;
  // A prompt of n_prefill ids: the model's own greedy story, cycled.
  std::vector<llm_token> prompt;
  prompt.push_back(info.bos);
  for (int k = 1; k < n_prefill; ++k) prompt.push_back(3 + (k * 37) % (info.n_vocab - 3));
  for (int rep = 0; rep < repeats; ++rep) {
    llm_request r;
    llm_request_init(&r);
    r.prompt = "Once upon a time";
    r.max_tokens = n_decode;
    r.ignore_eos = 1;
    r.sampling = &greedy;
    std::vector<llm_request> rs{r};
    decode.push_back(1000.0 / RunAll(ctx, rs)[0].tpot_ms);

    llm_request_init(&r);
    r.prompt_tokens = prompt.data();
    r.n_prompt_tokens = n_prefill;
    r.max_tokens = 1;
    r.sampling = &greedy;
    rs = {r};
    prefill.push_back(n_prefill * 1000.0 / RunAll(ctx, rs)[0].ttft_ms);

    llm_request_init(&r);
    r.prompt = "Once upon a time";
    r.max_tokens = n_decode / 4;
    r.ignore_eos = 1;
    r.sampling = &greedy;
    rs.assign(static_cast<size_t>(n_streams), r);
    auto t0 = std::chrono::steady_clock::now();
    auto ms = RunAll(ctx, rs);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double gen = 0;
    for (auto& m : ms) gen += m.generated_tokens;
    batch.push_back(gen / s);
  }
  std::printf("model: n_embd %d, n_layer %d, vocab %d; threads %d; median of %d runs\n", info.n_embd,
              info.n_layer, info.n_vocab, p.n_threads, repeats);
  std::printf("decode  (1 stream, %d tokens):         %10.0f tok/s\n", n_decode, Median(decode));
  std::printf("prefill (%d-token prompt, TTFT):       %10.0f tok/s\n", n_prefill, Median(prefill));
  std::printf("batch   (%d streams x %d tokens):      %10.0f tok/s generated\n", n_streams, n_decode / 4,
              Median(batch));
  llm_ctx_destroy(ctx);
  return 0;
}
