// bench_forward: CPU backend throughput on one model, below the engine.
//
//   decode:  one sequence, one token per Forward, `-n` steps from an empty
//            cache (like llama-bench tg)
//   prefill: a `-p`-token prompt in one Forward, logits of the last token
//            only (like llama-bench pp)
//   batched: with `-b B` (B > 1), B sequences whose caches hold `-c` tokens
//            each decode one token each per Forward, `-n` steps (the step
//            the engine runs under continuous batching); tok/s counts all
//            B sequences' tokens
//
//   depth:   with `-d D`, the decode steps start with D tokens already in
//            the cache (prefilled once, untimed, in chunks of 512): the
//            attention's share of a step at a long context
//
// Each figure is the median of `-r` repetitions, each on a fresh cache
// position 0 (or D; the KV pool is reused; positions are simply rewritten).
// `-k` picks the KV element type: f16 (the CPU default of a context), f32
// or q8_0.
//
// usage: bench_forward [-m model.gguf] [-t threads] [-n decode_steps]
//                      [-p prompt_tokens] [-r repetitions] [-b seqs -c context]
//                      [-d depth] [-k f16|f32|q8_0]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "model/gguf.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Fail(const llm::Status& s) {
  std::fprintf(stderr, "bench_forward: %s\n", s.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = std::string(LLM_SOURCE_DIR) + "/models/stories260K-f32.gguf";
  int threads = 1, n_decode = 128, n_prompt = 128, reps = 7, n_batch = 1, n_ctx = 64, depth = 0;
  std::string kv_name = "f16";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "-m") model = argv[i + 1];
    else if (a == "-t") threads = std::atoi(argv[i + 1]);
    else if (a == "-n") n_decode = std::atoi(argv[i + 1]);
    else if (a == "-p") n_prompt = std::atoi(argv[i + 1]);
    else if (a == "-r") reps = std::atoi(argv[i + 1]);
    else if (a == "-b") n_batch = std::atoi(argv[i + 1]);
    else if (a == "-c") n_ctx = std::atoi(argv[i + 1]);
    else if (a == "-d") depth = std::atoi(argv[i + 1]);
    else if (a == "-k") kv_name = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "usage: %s [-m model.gguf] [-t threads] [-n decode_steps] [-p prompt_tokens] [-r reps] "
                   "[-b seqs -c context] [-d depth] [-k f16|f32|q8_0]\n",
                   argv[0]);
      return 2;
    }
  }
  if (n_decode < 1 || n_prompt < 1 || reps < 1 || n_batch < 1 || n_ctx < 1 || depth < 0) {
    std::fprintf(stderr, "bench_forward: -n, -p, -r, -b and -c must be positive, -d not negative\n");
    return 2;
  }
  const int32_t kv_type = kv_name == "f32" ? LLM_KV_F32 : kv_name == "f16" ? LLM_KV_F16 : kv_name == "q8_0" ? LLM_KV_Q8_0 : -1;
  if (kv_type < 0) {
    std::fprintf(stderr, "bench_forward: -k must be f16, f32 or q8_0\n");
    return 2;
  }

  auto file = llm::GgufFile::Open(model);
  if (!file.ok()) return Fail(file.status());
  auto config = llm::ModelConfig::FromGguf(*file.value());
  if (!config.ok()) return Fail(config.status());
  auto weights = llm::ModelWeights::FromGguf(*file.value(), config.value());
  if (!weights.ok()) return Fail(weights.status());
  const llm::ModelConfig& c = config.value();

  llm::KvCacheSpec kv;
  kv.block_size = 16;
  kv.kv_type = kv_type;
  const int max_pos = n_batch > 1 ? n_ctx + n_decode : std::max(depth + n_decode + 1, n_prompt);
  const int blocks_per_seq = (max_pos + kv.block_size - 1) / kv.block_size;
  kv.n_blocks = blocks_per_seq * n_batch;
  auto created = llm::CreateCpuBackend(c, weights.value(), kv, threads);
  if (!created.ok()) return Fail(created.status());
  llm::Backend& backend = *created.value();

  std::vector<int32_t> table(kv.n_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::vector<float> logits(c.n_vocab);
  const int32_t last_row = 0;

  // One Forward of `tokens` at position n_past, logits of its last token.
  auto step = [&](const int32_t* tokens, int n, int n_past) {
    llm::BatchSeq s;
    s.first = 0;
    s.n_tokens = n;
    s.n_past = n_past;
    s.block_table = table;
    const int32_t row = n - 1;
    llm::Batch b;
    b.tokens = std::span<const int32_t>(tokens, n);
    b.seqs = std::span<const llm::BatchSeq>(&s, 1);
    b.logit_rows = std::span<const int32_t>(n == 1 ? &last_row : &row, 1);
    return backend.Forward(b, logits.data());
  };

  std::vector<int32_t> prompt(n_prompt);
  for (int i = 0; i < n_prompt; ++i) prompt[i] = i == 0 ? 1 : 3 + (i * 37) % (c.n_vocab - 3);

  if (n_batch > 1) {
    // Each sequence's context: its own prompt, prefilled once outside the timing.
    std::vector<int32_t> ctx(n_ctx);
    for (int q = 0; q < n_batch; ++q) {
      for (int i = 0; i < n_ctx; ++i) ctx[i] = i == 0 ? 1 : 3 + (i * 37 + q * 101) % (c.n_vocab - 3);
      llm::BatchSeq s;
      s.n_tokens = n_ctx;
      s.block_table = std::span<const int32_t>(table).subspan(q * blocks_per_seq, blocks_per_seq);
      const int32_t row = n_ctx - 1;
      llm::Batch b;
      b.tokens = ctx;
      b.seqs = std::span<const llm::BatchSeq>(&s, 1);
      b.logit_rows = std::span<const int32_t>(&row, 1);
      llm::Status st = backend.Forward(b, logits.data());
      if (!st.ok()) return Fail(st);
    }
    std::vector<llm::BatchSeq> seqs(n_batch);
    std::vector<int32_t> rows(n_batch), toks(n_batch, 3);
    std::vector<float> all_logits(static_cast<size_t>(n_batch) * c.n_vocab);
    std::vector<double> tps, step_ms;
    for (int r = 0; r < reps + 1; ++r) {  // the first repetition warms up
      const auto t0 = Clock::now();
      for (int i = 0; i < n_decode; ++i) {
        const auto ts = Clock::now();
        for (int q = 0; q < n_batch; ++q) {
          seqs[q].first = q;
          seqs[q].n_tokens = 1;
          seqs[q].n_past = n_ctx + i;
          seqs[q].block_table = std::span<const int32_t>(table).subspan(q * blocks_per_seq, blocks_per_seq);
          rows[q] = q;
        }
        llm::Batch b;
        b.tokens = toks;
        b.seqs = seqs;
        b.logit_rows = rows;
        llm::Status st = backend.Forward(b, all_logits.data());
        if (!st.ok()) return Fail(st);
        if (r > 0) step_ms.push_back(1e3 * Seconds(ts, Clock::now()));
        for (int q = 0; q < n_batch; ++q) {
          const float* l = all_logits.data() + static_cast<size_t>(q) * c.n_vocab;
          toks[q] = static_cast<int32_t>(std::max_element(l, l + c.n_vocab) - l);
        }
      }
      if (r > 0) tps.push_back(static_cast<double>(n_decode) * n_batch / Seconds(t0, Clock::now()));
    }
    std::printf("model    %s\nkernels  %s, threads %d, median of %d\n", model.c_str(), llm::cpu::BestKernels().name,
                threads, reps);
    // The fastest tenth of the steps: what a step costs when the host leaves
    // the vCPUs alone (steal only ever adds), for A/B runs on a noisy VM.
    std::sort(step_ms.begin(), step_ms.end());
    std::printf("batched  %d seqs x %d steps from context %d: %10.0f tok/s  (%.3f ms/step; fastest tenth %.3f)\n",
                n_batch, n_decode, n_ctx, Median(tps), 1e3 * n_batch / Median(tps), step_ms[step_ms.size() / 10]);
    return 0;
  }

  if (depth > 0) {  // the context the decode steps attend to, prefilled once
    std::vector<int32_t> ctx(512);
    for (int p0 = 0; p0 < depth; p0 += 512) {
      const int n = std::min(512, depth - p0);
      for (int i = 0; i < n; ++i) ctx[i] = p0 + i == 0 ? 1 : 3 + ((p0 + i) * 37) % (c.n_vocab - 3);
      llm::Status st = step(ctx.data(), n, p0);
      if (!st.ok()) return Fail(st);
    }
  }

  std::vector<double> decode_tps, prefill_tps;
  for (int r = 0; r < reps + 1; ++r) {  // the first repetition warms up
    // ---- decode: greedy from BOS (or from the depth-token context)
    int32_t tok = 1;
    const auto t0 = Clock::now();
    for (int i = 0; i < n_decode; ++i) {
      llm::Status st = step(&tok, 1, depth + i);
      if (!st.ok()) return Fail(st);
      tok = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    const auto t1 = Clock::now();
    if (depth > 0) {  // the prefill would overwrite the context
      if (r > 0) decode_tps.push_back(n_decode / Seconds(t0, t1));
      continue;
    }
    // ---- prefill
    llm::Status st = step(prompt.data(), n_prompt, 0);
    if (!st.ok()) return Fail(st);
    const auto t2 = Clock::now();
    if (r == 0) continue;
    decode_tps.push_back(n_decode / Seconds(t0, t1));
    prefill_tps.push_back(n_prompt / Seconds(t1, t2));
  }

  std::printf("model    %s (n_embd %d, n_layer %d, n_head %d/%d, n_ff %d, vocab %d)\n", model.c_str(), c.n_embd,
              c.n_layer, c.n_head, c.n_head_kv, c.n_ff, c.n_vocab);
  std::printf("kernels  %s, threads %d, median of %d, KV %s\n", llm::cpu::BestKernels().name, threads, reps,
              kv_name.c_str());
  std::printf("decode   %6d tokens  %10.0f tok/s  (%.2f us/token) at depth %d\n", n_decode, Median(decode_tps),
              1e6 / Median(decode_tps), depth);
  if (depth > 0) return 0;
  std::printf("prefill  %6d tokens  %10.0f tok/s  (%.3f ms/prompt)\n", n_prompt, Median(prefill_tps),
              1e3 * n_prompt / Median(prefill_tps));
  return 0;
}
