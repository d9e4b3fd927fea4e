// llm-perplexity: perplexity of a text file, computed the way llama.cpp's
// perplexity tool computes it, so the figures compare directly:
//   1. drop one trailing newline; tokenize the whole text with BOS;
//   2. split into floor(n / CTX) non-overlapping chunks of CTX tokens;
//   3. each chunk starts with BOS (its first token replaced, for models that
//      add BOS) and is scored on
//      its second half: positions CTX/2 .. CTX-2 predict the next token;
//   4. PPL = exp(mean NLL).
// All chunks are submitted at once and run batched by the engine; the
// per-position log-probabilities come back in each request's final event.
//
//   llm-perplexity [-m MODEL] -f FILE [-c CTX] [-t THREADS] [-kv|-ctk|-ctv f16|f32|q8_0|q4_0|fp8_e4m3] [--backend cpu|cuda]
//                  [--nll-out FILE]
// --nll-out writes each scored token's NLL, one per line in chunk order, for
// token-by-token comparisons with another runtime or a reference.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli_common.h"
#include "llm.h"

int main(int argc, char** argv) {
  llm_ctx_params params;
  llm_ctx_params_init(&params);
  std::string file, nll_out;
  int32_t n_ctx = 512;
  int32_t kv_both = 0, kv_k = 0, kv_v = 0;  // -kv, -ctk, -ctv
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "-m" && v) { params.model_path = v; ++i; }
    else if (a == "-f" && v) { file = v; ++i; }
    else if (a == "--nll-out" && v) { nll_out = v; ++i; }
    else if (a == "-c") { n_ctx = static_cast<int32_t>(cli::NumberArg("-c", v)); ++i; }
    else if (a == "-t") { params.n_threads = static_cast<int32_t>(cli::NumberArg("-t", v)); ++i; }
    else if (a == "-kv") { kv_both = cli::KvTypeArg("-kv", v); ++i; }
    else if (a == "--backend" && v && (std::string(v) == "cpu" || std::string(v) == "cuda")) {
      params.backend = std::string(v) == "cpu" ? LLM_BACKEND_CPU : LLM_BACKEND_CUDA;
      ++i;
    }
    else if (a == "-ctk" || a == "--cache-type-k") { kv_k = cli::KvTypeArg(a.c_str(), v); ++i; }
    else if (a == "-ctv" || a == "--cache-type-v") { kv_v = cli::KvTypeArg(a.c_str(), v); ++i; }
    else {
      std::fprintf(stderr, "usage: llm-perplexity [-m MODEL] -f FILE [-c CTX] [-t THREADS] [-kv|-ctk|-ctv f16|f32|q8_0|q4_0|fp8_e4m3] [--backend cpu|cuda] [--nll-out FILE]\n");
      return 2;
    }
  }
  cli::ApplyKvTypes(kv_both, kv_k, kv_v, &params);
  if (file.empty() || n_ctx < 4) {
    std::fprintf(stderr, "usage: llm-perplexity [-m MODEL] -f FILE [-c CTX>=4] [-t THREADS]\n");
    return 2;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", file.c_str());
    return 1;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();

  params.n_ctx = n_ctx;
  llm_ctx* ctx = nullptr;
  if (cli::Failed(llm_ctx_create(&params, &ctx), "llm_ctx_create")) return 1;
  llm_model_info info{};
  info.struct_size = sizeof info;
  llm_model_get_info(ctx, &info);

  std::vector<llm_token> ids = cli::Tokenize(ctx, text, LLM_TOKENIZE_ADD_SPECIAL);
  // As llama.cpp: chunks start with BOS only for models that add one.
  const bool adds_bos = !ids.empty() && info.bos >= 0 && ids[0] == info.bos;
  const int32_t n_chunks = static_cast<int32_t>(ids.size()) / n_ctx;
  if (n_chunks == 0) {
    std::fprintf(stderr, "%zu tokens: need at least %d\n", ids.size(), n_ctx);
    llm_ctx_destroy(ctx);
    return 1;
  }
  std::fprintf(stderr, "%zu tokens, %d chunks of %d\n", ids.size(), n_chunks, n_ctx);

  llm_sampling_params sampling;
  llm_sampling_params_init(&sampling);
  sampling.temperature = 0.0f;
  std::map<llm_request_id, int32_t> chunk_of;
  for (int32_t c = 0; c < n_chunks; ++c) {
    std::vector<llm_token> chunk(ids.begin() + int64_t{c} * n_ctx, ids.begin() + int64_t{c + 1} * n_ctx);
    if (adds_bos) chunk[0] = info.bos;
    llm_request req;
    llm_request_init(&req);
    req.prompt_tokens = chunk.data();
    req.n_prompt_tokens = n_ctx;
    req.max_tokens = 1;
    req.prompt_logprobs = 1;
    req.sampling = &sampling;
    llm_request_id id = 0;
    while (true) {
      llm_status s = llm_submit(ctx, &req, &id);
      if (s == LLM_ERR_BUSY) continue;
      if (cli::Failed(s, "llm_submit")) {
        llm_ctx_destroy(ctx);
        return 1;
      }
      break;
    }
    chunk_of[id] = c;
  }

  // Collect per-chunk NLL sums; print the running estimate in chunk order.
  std::vector<std::vector<double>> nll(n_chunks);
  int32_t n_done = 0;
  std::vector<llm_event> events(16);
  while (n_done < n_chunks) {
    uint32_t n = 0;
    events[0].struct_size = sizeof(llm_event);
    if (cli::Failed(llm_poll(ctx, events.data(), static_cast<uint32_t>(events.size()), &n, 1000), "llm_poll")) break;
    for (uint32_t k = 0; k < n; ++k) {
      const llm_event& e = events[k];
      if (e.type != LLM_EVENT_FINAL) continue;
      if (e.status != LLM_OK || e.n_prompt_logprobs != n_ctx - 1) {
        std::fprintf(stderr, "chunk failed: %s %s\n", llm_status_str(e.status), e.message);
        llm_ctx_destroy(ctx);
        return 1;
      }
      std::vector<double>& v = nll[chunk_of[e.request_id]];
      for (int32_t p = n_ctx / 2; p <= n_ctx - 2; ++p) v.push_back(-static_cast<double>(e.prompt_logprobs[p]));
      ++n_done;
    }
  }
  double sum = 0, sum2 = 0;
  int64_t count = 0;
  for (int32_t c = 0; c < n_chunks; ++c) {
    for (double x : nll[c]) {
      sum += x;
      sum2 += x * x;
      ++count;
    }
    std::fprintf(stderr, "[%d]%.4f,", c + 1, std::exp(sum / count));
  }
  const double mean = sum / count;
  const double ppl = std::exp(mean);
  const double var = sum2 / count - mean * mean;
  const double stderr_ppl = count > 1 ? ppl * std::sqrt(var / (count - 1)) : 0.0;
  std::fprintf(stderr, "\n");
  if (!nll_out.empty()) {
    std::ofstream out(nll_out);
    for (const std::vector<double>& v : nll)
      for (double x : v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.9g\n", x);
        out << buf;
      }
    if (!out) std::fprintf(stderr, "cannot write %s\n", nll_out.c_str());
  }
  std::printf("tokens scored: %lld, mean NLL: %.6f\n", static_cast<long long>(count), mean);
  std::printf("perplexity: %.4f +/- %.5f\n", ppl, stderr_ppl);
  llm_ctx_destroy(ctx);
  return 0;
}
