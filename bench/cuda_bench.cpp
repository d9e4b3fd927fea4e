// cuda-bench: CUDA backend and kernel figures on one GPU.
//
//   (a) batch-1 decode: tokens/s and achieved bandwidth (weight + KV bytes
//       read per token / time per token) against a device-to-device
//       cudaMemcpy bandwidth measured in the same run
//   (b) end-to-end throughput through the C API (engine, scheduler, CUDA
//       backend with decode graphs, host sampling) at concurrency 1, 8, 64
//       and 256: 512-token prompts (all distinct: no prefix-cache hits),
//       128 generated tokens each (greedy, EOS ignored)
//   (c) per kernel: prefill attention TFLOP/s and decode attention GB/s for
//       sequence lengths 512 .. 16k (Llama-3.1-8B attention shape)
//   (d) TTFT of a 2k-token prompt (one Forward, logits of the last row)
//   (e) the quantized GEMV kernel alone on Llama-3.1-8B matrix shapes
//       (Q4_K and Q6_K blocks, n = 1 and 8): GB/s of weights streamed
//
// Bytes read per decode token are the device's: the weights as the backend
// holds them (a Q4_K_M file's blocks, or BF16), from
// CudaBackend::decode_weight_bytes(), plus the BF16 K and V of the context.
//
//   cuda-bench [--model FILE.gguf] [--prompt 512] [--steps 128] [--json FILE] [--kernels-only] [--no-throughput]
//              [--no-kernels] [--no-ttft] [--n-cpu-moe N] [--moe-policy auto|cpu|copy] [--moe-cache-mib N]
//              [--no-prefetch]
//
// The MoE options keep the experts of the first N MoE layers (-1: all) in
// host memory (llm_ctx_params.n_cpu_moe and its companions), so (a) measures
// decode with experts run on the CPU or copied into the device cache; (a)
// then also reports the host-expert counters (steps on each path, bytes
// copied per token, cache and prefetch hit rates). --no-ttft skips (d).
//
// (a), (b) and (d) need --model (e.g. llm-synth --shape llama-3.1-8b); (c)
// needs none. --no-throughput skips (b) (it loads the model a second time);
// --no-kernels skips (c), which is the same for every model (a second model's
// run need not repeat it). The device-to-device copy bandwidth is measured in
// every run: (a) is reported as a share of it. Timings: device events (kernels)
// or a synchronised host clock (Forward, which returns with the logits on the
// host); medians after warm-up.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention_decode.cuh"
#include "attention_prefill.cuh"
#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "quant_gemv.cuh"
#include "random_fill.cuh"
#include "llm.h"
#include "model/model.h"

namespace {

using llm::cuda::bf16;

#define CK(expr)                                                                               \
  do {                                                                                         \
    const cudaError_t e_ = (expr);                                                             \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

struct Row {
  std::string section, name;
  double value;
  std::string unit;
  std::string note;
};
std::vector<Row> g_rows;
std::string g_json_path, g_device;  // --json, and the device's name for it

// The rows so far as JSON (--json), rewritten after every row: a run cut
// short (a time limit, a crash in a later section) keeps what it measured.
bool WriteJson() {
  if (g_json_path.empty()) return true;
  const std::string tmp = g_json_path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  std::fprintf(f, "{\"device\": \"%s\", \"results\": [\n", g_device.c_str());
  for (size_t i = 0; i < g_rows.size(); ++i)
    std::fprintf(f, "  {\"section\": \"%s\", \"name\": \"%s\", \"value\": %.6g, \"unit\": \"%s\", \"note\": \"%s\"}%s\n",
                 g_rows[i].section.c_str(), g_rows[i].name.c_str(), g_rows[i].value, g_rows[i].unit.c_str(),
                 g_rows[i].note.c_str(), i + 1 < g_rows.size() ? "," : "");
  std::fprintf(f, "]}\n");
  return std::fclose(f) == 0 && std::rename(tmp.c_str(), g_json_path.c_str()) == 0;
}

void Emit(const std::string& section, const std::string& name, double value, const std::string& unit,
          const std::string& note = "") {
  g_rows.push_back({section, name, value, unit, note});
  std::printf("%-10s %-44s %12.3f %-8s %s\n", section.c_str(), name.c_str(), value, unit.c_str(), note.c_str());
  std::fflush(stdout);
  if (!WriteJson()) std::fprintf(stderr, "cuda-bench: cannot write %s\n", g_json_path.c_str());
}

// Device-to-device copy bandwidth, bytes read + written per second.
double MemcpyBandwidth() {
  const size_t bytes = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<double> t;
  for (int i = 0; i < 12; ++i) {
    CK(cudaEventRecord(e0));
    CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (i >= 2) t.push_back(ms * 1e-3);
  }
  CK(cudaFree(a));
  CK(cudaFree(b));
  return 2.0 * bytes / Median(t);
}

// ------------------------------------------------------------------ (c) kernels

struct AttnSetup {
  int Hq = 32, Hkv = 8, hd = 128, bs = 16;
  std::vector<void*> bufs;
  ~AttnSetup() {
    for (void* p : bufs) cudaFree(p);
  }
  template <typename T>
  T* Upload(const std::vector<T>& v) {
    void* p = nullptr;
    CK(cudaMalloc(&p, std::max<size_t>(v.size(), 1) * sizeof(T)));
    CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    bufs.push_back(p);
    return static_cast<T*>(p);
  }
  template <typename T>
  T* Alloc(size_t n) {
    void* p = nullptr;
    CK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
    bufs.push_back(p);
    return static_cast<T*>(p);
  }
};

// Random inputs are made on the device (kernels/random_fill.cuh): the largest
// case, 32 sequences of 16k keys, is a billion bf16 values, which a host
// generator took most of a minute to make and copy.
bf16* RandomBf16(AttnSetup& s, size_t n, uint64_t seed) {
  bf16* p = s.Alloc<bf16>(n);
  CK(llm::cuda::LaunchRandomFillBf16(p, static_cast<int64_t>(n), seed, 1.0f, 0));
  return p;
}

// n_seqs sequences of `len` keys each; prefill: all len tokens are queries
// (n_past 0), decode: one query at position len - 1.
double TimeAttention(bool prefill, int n_seqs, int len, double* bytes_or_flops) {
  AttnSetup s;
  std::mt19937 rng(42);
  const int blocks_per_seq = (len + s.bs - 1) / s.bs;
  const int n_blocks = blocks_per_seq * n_seqs;
  llm::cuda::KvPoolLayout layout{1, s.Hkv, s.hd, s.bs};
  const size_t pool_elems = static_cast<size_t>(n_blocks) * layout.block_bytes() / sizeof(bf16);
  bf16* pool = RandomBf16(s, pool_elems, 42);
  std::vector<int32_t> tables(n_blocks);
  std::iota(tables.begin(), tables.end(), 0);
  std::shuffle(tables.begin(), tables.end(), rng);
  std::vector<llm::cuda::SeqDesc> seqs;
  std::vector<int32_t> tok_seq, tok_pos;
  int n_tok = 0;
  for (int q = 0; q < n_seqs; ++q) {
    const int nq = prefill ? len : 1;
    seqs.push_back({n_tok, nq, prefill ? 0 : len - 1, q * blocks_per_seq});
    for (int i = 0; i < nq; ++i) {
      tok_seq.push_back(q);
      tok_pos.push_back((prefill ? 0 : len - 1) + i);
    }
    n_tok += nq;
  }
  const size_t q_elems = static_cast<size_t>(n_tok) * s.Hq * s.hd;
  bf16* qd = RandomBf16(s, q_elems, 43);
  bf16* out = s.Alloc<bf16>(q_elems);
  auto* d_seqs = s.Upload(seqs);
  int32_t* d_tables = s.Upload(tables);
  int32_t* d_seq = s.Upload(tok_seq);
  int32_t* d_pos = s.Upload(tok_pos);
  llm::cuda::PagedKv kv;
  kv.k = reinterpret_cast<unsigned char*>(pool) + layout.KOffset(0);
  kv.v = reinterpret_cast<unsigned char*>(pool) + layout.VOffset(0);
  kv.block_stride = layout.block_bytes();
  kv.tile_bytes = layout.tile_bytes();
  kv.block_size = s.bs;

  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::function<cudaError_t()> run;
  llm::cuda::PrefillAttnParams pp;
  llm::cuda::DecodeAttnParams dp;
  void* ws = nullptr;
  size_t ws_bytes = 0;
  if (prefill) {
    std::vector<llm::cuda::PrefillWork> work;
    for (int q = 0; q < n_seqs; ++q)
      for (int q0 = 0; q0 < len; q0 += llm::cuda::kPrefillTileQ) work.push_back({q, q0});
    std::reverse(work.begin(), work.end());  // longest tiles first
    pp.q = qd;
    pp.out = out;
    pp.work = s.Upload(work);
    pp.n_work = static_cast<int32_t>(work.size());
    pp.seqs = d_seqs;
    pp.block_tables = d_tables;
    pp.kv = kv;
    pp.n_head = s.Hq;
    pp.n_head_kv = s.Hkv;
    pp.head_dim = s.hd;
    pp.scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
    run = [&] { return llm::cuda::LaunchPrefillAttention(pp, 0); };
    *bytes_or_flops = 2.0 * 2.0 * s.Hq * s.hd * (static_cast<double>(len) * (len + 1) / 2) * n_seqs;  // causal
  } else {
    std::vector<int32_t> items(n_tok);
    std::iota(items.begin(), items.end(), 0);
    dp.q = qd;
    dp.out = out;
    dp.items = s.Upload(items);
    dp.n_items = n_tok;
    dp.tok_seq = d_seq;
    dp.tok_pos = d_pos;
    dp.seqs = d_seqs;
    dp.block_tables = d_tables;
    dp.kv = kv;
    dp.n_head = s.Hq;
    dp.n_head_kv = s.Hkv;
    dp.head_dim = s.hd;
    dp.scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
    const int32_t slots = 2048;
    llm::cuda::PlanDecodeAttention(n_tok, s.Hkv, s.hd, len, prop.multiProcessorCount, slots, &dp.n_splits,
                                   &dp.keys_per_split);
    ws_bytes = llm::cuda::DecodeAttnWorkspaceBytes(slots, s.Hq, s.hd);
    ws = s.Alloc<char>(ws_bytes);
    run = [&] { return llm::cuda::LaunchDecodeAttention(dp, ws, ws_bytes, 0); };
    *bytes_or_flops = 2.0 * static_cast<double>(len) * s.Hkv * s.hd * 2 * n_seqs;  // K and V, bf16
  }
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) CK(run());
  CK(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int i = 0; i < 20; ++i) {
    CK(cudaEventRecord(e0));
    CK(run());
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e-3);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return Median(t);
}

// ------------------------------------------------------------------ (e) quantized GEMV

// y = x · Wᵀ for a (rows, cols) matrix of random `type` blocks (finite F16
// scales), n activation rows; returns seconds per launch.
double TimeQuantGemv(uint32_t type, int rows, int cols, int n, double* bytes) {
  const int32_t be = llm::cuda::QuantBlockElems(type), bb = llm::cuda::QuantBlockBytes(type);
  const size_t row_bytes = static_cast<size_t>(cols / be) * bb, total = row_bytes * rows;
  const uint16_t scale = 0x2000;  // F16 ~0.0078: finite scales wherever they sit in the block
  const int32_t at0 = type == 14 ? 208 : 0;                // Q6_K keeps d last
  const int32_t at1 = type == 12 || type == 13 ? 2 : -1;   // Q4_K/Q5_K: dmin after d
  void *w = nullptr, *x = nullptr, *y = nullptr;
  CK(cudaMalloc(&w, total));
  CK(llm::cuda::LaunchRandomFillBlocks(static_cast<uint8_t*>(w), static_cast<int64_t>(total / bb), bb, 7, at0, at1,
                                       scale, 0));
  const size_t n_x = static_cast<size_t>(n) * cols;
  CK(cudaMalloc(&x, n_x * 2));
  CK(llm::cuda::LaunchRandomFillBf16(static_cast<bf16*>(x), static_cast<int64_t>(n_x), 8, 1.0f, 0));
  CK(cudaMalloc(&y, static_cast<size_t>(n) * rows * 4));
  llm::cuda::QuantMatrix m;
  m.part[0] = llm::cuda::QuantPart{w, type, rows, static_cast<int64_t>(row_bytes)};
  m.n_parts = 1;
  m.rows = rows;
  m.cols = cols;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) CK(llm::cuda::LaunchQuantGemv(m, static_cast<const bf16*>(x), n, static_cast<float*>(y), 0));
  CK(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int i = 0; i < 20; ++i) {
    CK(cudaEventRecord(e0));
    CK(llm::cuda::LaunchQuantGemv(m, static_cast<const bf16*>(x), n, static_cast<float*>(y), 0));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e-3);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaFree(w));
  CK(cudaFree(x));
  CK(cudaFree(y));
  *bytes = static_cast<double>(total);
  return Median(t);
}

// ------------------------------------------------------------------ (a), (d) model

double ForwardSeconds(llm::Backend* be, const std::vector<llm_token>& toks, int32_t n_past,
                      const std::vector<int32_t>& table, std::vector<float>* logits) {
  llm::BatchSeq s{0, static_cast<int32_t>(toks.size()), n_past, table};
  const int32_t last = static_cast<int32_t>(toks.size()) - 1;
  llm::Batch b{toks, std::span<const llm::BatchSeq>(&s, 1), std::span<const int32_t>(&last, 1)};
  const auto t0 = std::chrono::steady_clock::now();
  llm::Status st = be->Forward(b, logits->data());
  const auto t1 = std::chrono::steady_clock::now();
  if (!st.ok()) {
    std::fprintf(stderr, "Forward failed: %s\n", st.message().c_str());
    std::exit(1);
  }
  return std::chrono::duration<double>(t1 - t0).count();
}

struct MoeHostBench {
  int32_t n_cpu_moe = 0;
  int32_t policy = LLM_MOE_HOST_AUTO;
  int64_t cache_bytes = 0;
  bool prefetch = true;
};

void EmitMoeHost(const llm::MoeOffloadStats& s) {
  const double tok = static_cast<double>(std::max<int64_t>(1, s.tokens));
  Emit("moe-host", "layers with experts in host memory", s.host_layers, "layers",
       std::to_string(s.host_bytes / (1 << 20)) + " MiB of experts on the host");
  Emit("moe-host", "device expert cache", static_cast<double>(s.cache_bytes) / (1 << 20), "MiB",
       std::to_string(s.cache_slots) + " slots");
  Emit("moe-host", "layer-steps run on the CPU", static_cast<double>(s.cpu_steps), "steps");
  Emit("moe-host", "layer-steps copied to the device", static_cast<double>(s.copy_steps), "steps");
  Emit("moe-host", "bytes copied host->device per token", static_cast<double>(s.bytes_copied) / tok / 1e6, "MB");
  const int64_t looks = s.cache_hits + s.cache_misses;
  Emit("moe-host", "cache hit rate", looks > 0 ? 100.0 * s.cache_hits / looks : 0.0, "%");
  Emit("moe-host", "prefetched experts used", s.prefetch_experts > 0 ? 100.0 * s.prefetch_used / s.prefetch_experts : 0.0,
       "%", std::to_string(s.prefetch_experts) + " prefetched");
}

void ModelBench(const std::string& path, int prompt, int steps, double d2d, const MoeHostBench& moe, bool ttft_on) {
  auto m = llm::Model::Load(path.c_str());
  if (!m.ok()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), m.status().message().c_str());
    std::exit(1);
  }
  const llm::ModelConfig& c = (*m)->config;
  const int ctx = std::max(prompt + steps, 2048) + 16;
  llm::KvCacheSpec kv{16, (ctx + 15) / 16};
  llm::CudaBackendOptions o;
  o.max_batch_tokens = 2048;
  o.n_cpu_moe = moe.n_cpu_moe;
  o.moe_host_policy = moe.policy;
  o.moe_cache_bytes = moe.cache_bytes;
  o.moe_prefetch = moe.prefetch;
  const auto t0 = std::chrono::steady_clock::now();
  auto be = llm::CreateCudaBackend(c, (*m)->weights, &kv, o);
  if (!be.ok()) {
    std::fprintf(stderr, "CUDA backend: %s\n", be.status().message().c_str());
    std::exit(1);
  }
  Emit("load", "weights upload (quantized: copy; else host bf16 conversion + copy)",
       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), "s");
  const auto* cb = dynamic_cast<const llm::cuda::CudaBackend*>(be->get());
  if (cb == nullptr) {
    std::fprintf(stderr, "cuda-bench: not the CUDA backend\n");
    std::exit(1);
  }
  Emit("load", "weights on the device", cb->weight_bytes() / 1e9, "GB",
       cb->weights_quantized() ? "block-quantized (file format)" : "BF16");
  std::vector<int32_t> table(kv.n_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::vector<float> logits(c.n_vocab);
  std::vector<llm_token> toks(prompt);
  for (int i = 0; i < prompt; ++i) toks[i] = (i * 7919 + 13) % c.n_vocab;

  // ---- (a) batch-1 decode after a `prompt`-token prefill
  ForwardSeconds(be->get(), toks, 0, table, &logits);
  std::vector<double> t;
  for (int i = 0; i < steps; ++i)
    t.push_back(ForwardSeconds(be->get(), {static_cast<llm_token>((i * 31 + 7) % c.n_vocab)}, prompt + i, table, &logits));
  t.erase(t.begin(), t.begin() + std::min<size_t>(8, t.size() / 4));  // warm-up
  const double step = Median(t);
  const double E = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff, V = c.n_vocab, L = c.n_layer;
  const double weight_bytes = static_cast<double>(cb->decode_weight_bytes());  // as held on the device
  const double kv_bytes = 2.0 * 2 * L * KV * (prompt + steps / 2.0);           // BF16 K+V read, mean context
  Emit("decode", "batch-1 decode tokens/s (ctx " + std::to_string(prompt) + "+)", 1.0 / step, "tok/s");
  Emit("decode", "time per token", step * 1e3, "ms");
  Emit("decode", "bytes read per token (weights + KV)", (weight_bytes + kv_bytes) / 1e9, "GB");
  Emit("decode", "achieved bandwidth", (weight_bytes + kv_bytes) / step / 1e9, "GB/s",
       "= " + std::to_string(static_cast<int>(100 * (weight_bytes + kv_bytes) / step / d2d)) + "% of D2D memcpy");
  Emit("decode", "share of D2D copy bandwidth (goal >= 75)", 100.0 * (weight_bytes + kv_bytes) / step / d2d, "%",
       cb->weights_quantized() ? "quantized weights" : "BF16 weights");
  if (moe.n_cpu_moe != 0) EmitMoeHost(be->get()->moe_offload());
  if (!ttft_on) return;

  // ---- (d) TTFT of a 2k prompt
  std::vector<llm_token> p2k(2048);
  for (int i = 0; i < 2048; ++i) p2k[i] = (i * 104729 + 1) % c.n_vocab;
  ForwardSeconds(be->get(), p2k, 0, table, &logits);  // warm-up (cuBLAS heuristics, buffers)
  std::vector<double> tt;
  for (int i = 0; i < 5; ++i) tt.push_back(ForwardSeconds(be->get(), p2k, 0, table, &logits));
  const double ttft = Median(tt);
  const double params = L * (E * (Q + 2 * KV) + Q * E + 3 * E * F) + V * E;
  Emit("ttft", "TTFT, 2048-token prompt (one Forward)", ttft * 1e3, "ms");
  Emit("ttft", "prefill throughput", 2048.0 / ttft, "tok/s",
       "~" + std::to_string(static_cast<int>(2.0 * params * 2048 / ttft / 1e12)) + " TFLOP/s in GEMMs");
}

// ------------------------------------------------------------------ (b) throughput

void ThroughputBench(const std::string& path) {
  constexpr int kPrompt = 512, kGen = 128, kMaxConc = 256;
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = path.c_str();
  p.backend = LLM_BACKEND_CUDA;
  p.n_ctx = kPrompt + kGen + 16;
  p.max_seqs = kMaxConc;
  p.max_batch_tokens = 4096;
  p.max_queued = 4 * kMaxConc;
  llm_ctx* ctx = nullptr;
  if (llm_ctx_create(&p, &ctx) != LLM_OK) {
    std::printf("(b) skipped: llm_ctx_create: %s\n", llm_last_error());
    return;
  }
  llm_model_info info;
  std::memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  llm_model_get_info(ctx, &info);
  const int32_t V = info.n_vocab;
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0.0f;
  std::vector<llm_event> ev(1024);
  uint64_t salt = 1;  // every run its own prefix-cache partition: prompts never hit the cache

  // Runs `conc` requests at once; returns {seconds, generated tokens, mean TTFT ms, mean TPOT ms}.
  auto run = [&](int conc, int gen) -> std::vector<double> {
    std::vector<std::vector<llm_token>> prompts(conc, std::vector<llm_token>(kPrompt));
    for (int r = 0; r < conc; ++r)
      for (int i = 0; i < kPrompt; ++i)
        prompts[r][i] = static_cast<llm_token>((static_cast<int64_t>(i) * 7919 + r * 104729 + 13) % V);
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < conc; ++r) {
      llm_request rq;
      llm_request_init(&rq);
      rq.prompt_tokens = prompts[r].data();
      rq.n_prompt_tokens = kPrompt;
      rq.max_tokens = gen;
      rq.ignore_eos = 1;
      rq.sampling = &sp;
      rq.cache_salt = salt++;
      llm_request_id id;
      if (llm_submit(ctx, &rq, &id) != LLM_OK) {
        std::fprintf(stderr, "llm_submit: %s\n", llm_last_error());
        std::exit(1);
      }
    }
    int done = 0;
    double tokens = 0, ttft = 0, tpot = 0;
    while (done < conc) {
      ev[0].struct_size = sizeof(llm_event);
      uint32_t n = 0;
      if (llm_poll(ctx, ev.data(), static_cast<uint32_t>(ev.size()), &n, 1000) != LLM_OK) {
        std::fprintf(stderr, "llm_poll: %s\n", llm_last_error());
        std::exit(1);
      }
      for (uint32_t i = 0; i < n; ++i) {
        if (ev[i].type != LLM_EVENT_FINAL) continue;
        if (ev[i].status != LLM_OK) {
          std::fprintf(stderr, "request failed: %s\n", ev[i].message);
          std::exit(1);
        }
        ++done;
        tokens += ev[i].metrics.generated_tokens;
        ttft += ev[i].metrics.ttft_ms;
        tpot += ev[i].metrics.tpot_ms;
      }
    }
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return {sec, tokens, ttft / conc, tpot / conc};
  };

  for (int conc : {1, 8, 64, 256}) {
    run(conc, 8);  // warm-up: cuBLAS heuristics, graph capture of this batch size's buckets
    const std::vector<double> r = run(conc, kGen);
    Emit("throughput", "concurrency " + std::to_string(conc) + ": generated tok/s (512 in, 128 out)", r[1] / r[0],
         "tok/s",
         "prompt+gen " + std::to_string(static_cast<int>((r[1] + conc * kPrompt) / r[0])) + " tok/s, mean TTFT " +
             std::to_string(static_cast<int>(r[2])) + " ms, mean TPOT " + std::to_string(r[3]) + " ms, wall " +
             std::to_string(r[0]) + " s");
  }
  llm_ctx_destroy(ctx);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, json;
  int prompt = 512, steps = 128;
  bool kernels_only = false, throughput = true, kernels = true, ttft = true;
  MoeHostBench moe;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) {
      model = argv[++i];
    } else if (a == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else if (a == "--prompt" && i + 1 < argc) {
      prompt = std::atoi(argv[++i]);
    } else if (a == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (a == "--kernels-only") {
      kernels_only = true;
    } else if (a == "--no-throughput") {
      throughput = false;
    } else if (a == "--no-kernels") {
      kernels = false;
    } else if (a == "--no-ttft") {
      ttft = false;
    } else if (a == "--n-cpu-moe" && i + 1 < argc) {
      moe.n_cpu_moe = std::atoi(argv[++i]);
    } else if (a == "--moe-policy" && i + 1 < argc) {
      const std::string v = argv[++i];
      moe.policy = v == "cpu" ? LLM_MOE_HOST_CPU : v == "copy" ? LLM_MOE_HOST_COPY : LLM_MOE_HOST_AUTO;
      if (v != "cpu" && v != "copy" && v != "auto") {
        std::fprintf(stderr, "cuda-bench: --moe-policy takes auto, cpu or copy\n");
        return 2;
      }
    } else if (a == "--moe-cache-mib" && i + 1 < argc) {
      moe.cache_bytes = static_cast<int64_t>(std::atoll(argv[++i])) << 20;
    } else if (a == "--no-prefetch") {
      moe.prefetch = false;
    } else {
      std::fprintf(stderr,
                   "usage: cuda-bench [--model FILE.gguf] [--prompt N] [--steps N] [--json FILE] [--kernels-only] "
                   "[--no-throughput] [--no-kernels] [--no-ttft] [--n-cpu-moe N] [--moe-policy auto|cpu|copy] "
                   "[--moe-cache-mib N] [--no-prefetch]\n");
      return 2;
    }
  }
  int n_dev = 0;
  if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
    std::fprintf(stderr, "cuda-bench: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d, %d SMs, %.1f GiB)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
              prop.totalGlobalMem / 1073741824.0);
  g_json_path = json;
  g_device = prop.name;
  std::printf("%-10s %-44s %12s %-8s\n", "section", "figure", "value", "unit");
  const double d2d = MemcpyBandwidth();
  Emit("memory", "device-to-device cudaMemcpy (read+write)", d2d / 1e9, "GB/s");

  for (int len : {512, 1024, 2048, 4096, 8192, 16384}) {
    if (!kernels) break;
    double flops = 0, bytes = 0;
    const double tp = TimeAttention(true, 1, len, &flops);
    Emit("prefill", "attention L=" + std::to_string(len) + " (32q/8kv heads, d128, causal)", flops / tp / 1e12, "TFLOP/s",
         std::to_string(tp * 1e3) + " ms");
    const double td = TimeAttention(false, 1, len, &bytes);
    Emit("decode", "attention batch 1, ctx " + std::to_string(len), bytes / td / 1e9, "GB/s",
         std::to_string(td * 1e6) + " us");
    const double td32 = TimeAttention(false, 32, len, &bytes);
    Emit("decode", "attention batch 32, ctx " + std::to_string(len), bytes / td32 / 1e9, "GB/s",
         std::to_string(td32 * 1e6) + " us");
  }
  // The types real files hold their matrices in (Q4_K_M/Q5_K_M: Q4_K or Q5_K
  // with Q6_K; Q8_0; Q4_0), each at n = 1, 2, 4, 8 activation rows.
  for (const auto& [type, name] : {std::pair<uint32_t, const char*>{12, "Q4_K"}, {14, "Q6_K"}, {13, "Q5_K"},
                                   {8, "Q8_0"}, {2, "Q4_0"}}) {
    if (!kernels) break;
    for (const auto& [rows, cols] : {std::pair<int, int>{28672, 4096}, {4096, 14336}}) {  // 8B gate|up, down
      for (int n : {1, 2, 4, 8}) {
        double bytes = 0;
        const double tg = TimeQuantGemv(type, rows, cols, n, &bytes);
        Emit("gemv", std::string(name) + " " + std::to_string(rows) + "x" + std::to_string(cols) + " n=" +
                         std::to_string(n),
             bytes / tg / 1e9, "GB/s",
             std::to_string(static_cast<int>(100 * bytes / tg / d2d)) + "% of D2D, " + std::to_string(tg * 1e6) + " us");
      }
    }
  }
  if (!kernels_only) {
    if (model.empty()) {
      std::printf("(a), (b) and (d) skipped: no --model (make one: llm-synth --shape llama-3.1-8b --out l8b.gguf)\n");
    } else {
      ModelBench(model, prompt, steps, d2d, moe, ttft);
      if (throughput) ThroughputBench(model);
    }
  }
  return WriteJson() ? 0 : 1;
}
