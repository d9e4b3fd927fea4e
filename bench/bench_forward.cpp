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
// position 0 (the KV pool is reused; positions are simply rewritten).
// `-d D` (single sequence): D tokens are prefilled once, untimed, and both
// decode and prefill start at position D (like llama-bench -d D).
// `-w MiB` (default 512, 0: off) first measures the streaming-read
// bandwidth of the same number of threads over a buffer of that size, and
// decode then reports the weight bytes read per token (as stored in the
// file: what any runtime must stream) times tok/s beside it.
// `-k` picks the KV element type: f16 (the CPU default of a context), f32
// or q8_0.
//
// usage: bench_forward [-m model.gguf] [-t threads] [-n decode_steps]
//                      [-p prompt_tokens] [-r repetitions] [-b seqs -c context]
//                      [-d depth] [-w bandwidth_buffer_MiB] [-k f16|f32|q8_0]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/quant_pack.h"
#include "util/env.h"
#include "model/gguf.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Sums n 64-bit words from p: 32-byte loads and a software prefetch 16
// lines ahead, as the packed matmuls stream their weights (so the ceiling is
// measured the way the kernels read, not with a compiler's 16-byte loop).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2"))) uint64_t SumWords(const uint64_t* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_prefetch(reinterpret_cast<const char*>(p + i) + 1024, _MM_HINT_T0);
    a = _mm256_add_epi64(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi64(b, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(a, b));
  uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) s += p[i];
  return s;
}
#else
uint64_t SumWords(const uint64_t* p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; ++i) s += p[i];
  return s;
}
#endif

// Streaming-read bandwidth, bytes/s: `threads` threads each sum their slice
// of a `mib`-MiB buffer (far larger than the caches); the fastest of 7
// passes after one that faults the pages in: a ceiling, and on a shared VM
// the neighbours' load only ever lowers a pass.
double StreamReadBandwidth(int threads, size_t mib) {
  const size_t n = mib * (1u << 20) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n);
  for (size_t i = 0; i < n; ++i) buf[i] = i;
  std::vector<uint64_t> sums(threads * 8);
  double best = 0;
  for (int pass = 0; pass < 8; ++pass) {
    const auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        const size_t b = n * t / threads, e = n * (t + 1) / threads;
        sums[t * 8] = SumWords(buf.data() + b, e - b);
      });
    for (auto& t : ts) t.join();
    if (pass > 0) best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / Seconds(t0, Clock::now()));
  }
  volatile uint64_t sink = sums[0];
  (void)sink;
  return best;
}

// Bytes of weights one decode step reads, as stored in the file: every
// tensor but the token embedding, of which one row is gathered, unless it is
// also the classifier (tied: no output.weight).
double WeightBytesPerToken(const llm::GgufFile& f) {
  double bytes = 0;
  const bool tied = f.FindTensor("output.weight") == nullptr;
  for (const llm::GgufTensorInfo& t : f.tensors()) {
    if (t.name == "token_embd.weight" && !tied) {
      bytes += static_cast<double>(t.nbytes) / std::max<int64_t>(1, t.dims.size() > 1 ? t.dims[1] : 1);
      continue;
    }
    bytes += static_cast<double>(t.nbytes);
  }
  return bytes;
}

// Bytes of matrices the CPU backend actually streams per decode step: the
// packed copy where it makes one (quant_pack.h: wider than the file for
// Q4_K and Q5_x), else the file's rows. Norms are left out (KBs).
double StreamedBytesPerToken(const llm::ModelWeights& w) {
  auto bytes = [](const llm::WeightView& v) -> double {
    if (v.empty()) return 0;
    if (!llm::ReadEnv().cpu_pack_off && llm::cpu::CanPackR8(v)) return static_cast<double>(llm::cpu::PackedR8Bytes(v));
    return static_cast<double>(v.rows) * static_cast<double>(v.row_bytes);
  };
  double total = bytes(w.output);
  for (const llm::LayerWeights& L : w.layers)
    for (const llm::WeightView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) total += bytes(*v);
  return total;
}

int Fail(const llm::Status& s) {
  std::fprintf(stderr, "bench_forward: %s\n", s.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = std::string(LLM_SOURCE_DIR) + "/models/stories260K-f32.gguf";
  int threads = 1, n_decode = 128, n_prompt = 128, reps = 7, n_batch = 1, n_ctx = 64, depth = 0, bw_mib = 512;
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
    else if (a == "-w") bw_mib = std::atoi(argv[i + 1]);
    else if (a == "-k") kv_name = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "usage: %s [-m model.gguf] [-t threads] [-n decode_steps] [-p prompt_tokens] [-r reps] "
                   "[-b seqs -c context] [-d depth] [-w bw_MiB] [-k f16|f32|q8_0|q4_0]\n",
                   argv[0]);
      return 2;
    }
  }
  if (n_decode < 1 || n_prompt < 1 || reps < 1 || n_batch < 1 || n_ctx < 1 || depth < 0 || bw_mib < 0) {
    std::fprintf(stderr, "bench_forward: -n, -p, -r, -b and -c must be positive, -d and -w not negative\n");
    return 2;
  }
  const int32_t kv_type = kv_name == "f32" ? LLM_KV_F32 : kv_name == "f16" ? LLM_KV_F16 : kv_name == "q8_0" ? LLM_KV_Q8_0
                        : kv_name == "q4_0" ? LLM_KV_Q4_0 : -1;
  if (kv_type < 0) {
    std::fprintf(stderr, "bench_forward: -k must be f16, f32, q8_0 or q4_0\n");
    return 2;
  }
  // Measured before the model is loaded, so its pages do not compete.
  const double stream_bw = bw_mib > 0 && n_batch == 1 ? StreamReadBandwidth(threads, bw_mib) : 0;

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
  const int max_pos = n_batch > 1 ? n_ctx + n_decode : depth + std::max(n_decode + 1, n_prompt);
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

  // ---- depth: the context decode and prefill run after, filled once in
  // chunks the size of the engine's default batch.
  for (int p = 0; p < depth;) {
    std::vector<int32_t> chunk(std::min(512, depth - p));
    for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = p + i == 0 ? 1 : 3 + ((p + i) * 37) % (c.n_vocab - 3);
    llm::Status st = step(chunk.data(), static_cast<int>(chunk.size()), p);
    if (!st.ok()) return Fail(st);
    p += static_cast<int>(chunk.size());
  }

  std::vector<double> decode_tps, prefill_tps;
  for (int r = 0; r < reps + 1; ++r) {  // the first repetition warms up
    // ---- decode: greedy from BOS (or from the depth's last token)
    int32_t tok = 1;
    const auto t0 = Clock::now();
    for (int i = 0; i < n_decode; ++i) {
      llm::Status st = step(&tok, 1, depth + i);
      if (!st.ok()) return Fail(st);
      tok = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    const auto t1 = Clock::now();
    // ---- prefill
    llm::Status st = step(prompt.data(), n_prompt, depth);
    if (!st.ok()) return Fail(st);
    const auto t2 = Clock::now();
    if (r == 0) continue;
    decode_tps.push_back(n_decode / Seconds(t0, t1));
    prefill_tps.push_back(n_prompt / Seconds(t1, t2));
  }

  std::printf("model    %s (n_embd %d, n_layer %d, n_head %d/%d, n_ff %d, vocab %d)\n", model.c_str(), c.n_embd,
              c.n_layer, c.n_head, c.n_head_kv, c.n_ff, c.n_vocab);
  std::printf("kernels  %s, threads %d, median of %d, depth %d\n", llm::cpu::BestKernels().name, threads, reps,
              depth);
  std::printf("decode   %6d tokens  %10.2f tok/s  (%.2f us/token)\n", n_decode, Median(decode_tps),
              1e6 / Median(decode_tps));
  std::printf("prefill  %6d tokens  %10.2f tok/s  (%.3f ms/prompt)\n", n_prompt, Median(prefill_tps),
              1e3 * n_prompt / Median(prefill_tps));
  const double wbytes = WeightBytesPerToken(*file.value());
  std::printf("weights  %.1f MB read per token (file layout); decode streams %.2f GB/s", wbytes / 1e6,
              wbytes * Median(decode_tps) / 1e9);
  if (stream_bw > 0) std::printf(", %.0f%% of streaming read %.2f GB/s (fastest pass)", 100 * wbytes * Median(decode_tps) / stream_bw,
                                 stream_bw / 1e9);
  const double pbytes = StreamedBytesPerToken(weights.value());
  std::printf("\nstreamed %.1f MB of matrices per token (CPU layout, packed where packed): %.2f GB/s\n", pbytes / 1e6,
              pbytes * Median(decode_tps) / 1e9);
  return 0;
}
