// The Q4_0 KV cache (llm_ctx_params.kv_type LLM_KV_Q4_0, CPU): its block
// rule against the gguf package's Q4_0 quantizer, the attention kernel
// reading Q4_0 tiles against a double reference, bytes per token through
// llm_stats, a real model's prompt log-probabilities beside F32's, the
// query's Q8_0 rounding against Q4_0 and Q8_0 keys, and the refusals
// (head_dim, CUDA).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unistd.h>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/kv_layout.h"
#include "backend/kv_rotation.h"
#include "backend/kv_wire.h"
#include "llm.h"
#include "support/api_helpers.h"
#include "support/prompt_logprobs.h"
#include "support/real_models.h"
#include "support/test_paths.h"
#include "synth_model.h"
#include "util/fp16.h"

namespace llm {
namespace {

#include "data/kv_q4_vectors.inc"

using cpu::KvElem;
using cpu::KvLayout;

// ------------------------------------------------------------ the block rule

// QuantizeBlockQ4 writes the bytes gguf's reference quantizer writes: random
// blocks at four magnitudes, zeros, ties between +m and -m, values on the
// rounding boundaries, F16's range.
TEST(KvQ4, BlockRuleMatchesGgufReference) {
  for (int i = 0; i < kKvQ4Vectors; ++i) {
    float x[32];
    std::memcpy(x, kKvQ4In[i], sizeof(x));
    uint8_t q[kQ4Block];
    const uint16_t d = QuantizeBlockQ4(x, q);
    uint8_t got[kQ4BlockBytes];
    std::memcpy(got, &d, 2);
    for (int j = 0; j < 16; ++j) got[2 + j] = static_cast<uint8_t>(q[j] | q[j + 16] << 4);
    for (int j = 0; j < 18; ++j) ASSERT_EQ(got[j], kKvQ4Out[i][j]) << "block " << i << " byte " << j;
  }
}

// NaN and infinities never reach an undefined cast: every q is in 0..15.
TEST(KvQ4, HostileValuesStayInRange) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j) - 16.0f;
  x[5] = std::nanf("");
  x[9] = INFINITY;
  uint8_t q[kQ4Block];
  QuantizeBlockQ4(x, q);
  for (int j = 0; j < 32; ++j) EXPECT_LE(q[j], 15) << j;
}

// ------------------------------------------------------------ the rotation

// HadamardRotate against the matrix written out by Sylvester's doubling
// (H_1 = 1/sqrt(n); [[H, H], [H, -H]]), the matrix llama.cpp's quantized
// cache multiplies rows by; H·H = I; the sizes follow llama.cpp's rule.
TEST(KvQ4, HadamardRotationIsSylvesterMatrix) {
  for (int n : {64, 128, 256}) {
    std::vector<double> m(static_cast<size_t>(n) * n, 0.0);
    m[0] = 1.0 / std::sqrt(static_cast<double>(n));
    for (int s = 1; s < n; s *= 2)
      for (int i = 0; i < s; ++i)
        for (int j = 0; j < s; ++j) {
          const double v = m[i * n + j];
          m[(i + s) * n + j] = v;
          m[i * n + j + s] = v;
          m[(i + s) * n + j + s] = -v;
        }
    std::mt19937 rng(n);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(2 * n)), y;  // two chunks
    for (float& e : x) e = dist(rng);
    x[3] = 40.0f;  // an outlier channel
    y = x;
    HadamardRotate(y.data(), 2 * n, n);
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < n; ++i) {
        double want = 0;
        for (int j = 0; j < n; ++j) want += m[i * n + j] * x[c * n + j];
        ASSERT_NEAR(y[c * n + i], want, 1e-4) << "n " << n << " chunk " << c << " row " << i;
      }
    HadamardRotate(y.data(), 2 * n, n);
    for (int i = 0; i < 2 * n; ++i) ASSERT_NEAR(y[i], x[i], 1e-4) << "H·H != I at " << i;
  }
  EXPECT_EQ(KvRotationK(64), 64);
  EXPECT_EQ(KvRotationK(128), 128);
  EXPECT_EQ(KvRotationK(192), 64);
  EXPECT_EQ(KvRotationK(256), 256);
  EXPECT_EQ(KvRotationK(32), 0);
  EXPECT_EQ(KvRotationK(96), 0);
  EXPECT_EQ(KvRotationV(256), 64);
  EXPECT_EQ(KvRotationV(96), 0);
}

// ------------------------------------------------------------ the kernel

// A one-layer, one-head Q4_0 pool laid out as kv_layout.h says, filled from
// gguf blocks of random values; Elem gives the stored values back. One side
// may be F16 instead (ek / ev: K and V of different types, kv_type_v).
struct Q4Pool {
  KvLayout lay;
  std::vector<uint8_t> bytes;
  std::vector<int32_t> table;
  std::vector<float> k, v;  // (n_blocks * bs, hd) values as stored: d * (q - 8)

  Q4Pool(int hd, int bs, int n_blocks, std::mt19937& rng, KvElem ek = KvElem::kQ4, KvElem ev = KvElem::kQ4) {
    lay = KvLayout{1, 1, hd, bs, ek, ev};
    bytes.assign(static_cast<size_t>(lay.block_bytes()) * n_blocks, 0);
    k.resize(static_cast<size_t>(n_blocks) * bs * hd);
    v.resize(k.size());
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(hd);
    for (int b = 0; b < n_blocks; ++b) {
      for (int kv = 0; kv < 2; ++kv) {
        uint8_t* tile = bytes.data() + b * lay.block_bytes() + (kv == 0 ? lay.KOffset(0, 0) : lay.VOffset(0, 0));
        uint16_t* sc = reinterpret_cast<uint16_t*>(tile + lay.ScalesOffset(KvElem::kQ4));
        const bool f16 = (kv == 0 ? ek : ev) == KvElem::kF16;
        for (int s = 0; s < bs; ++s) {
          for (float& e : x) e = dist(rng);
          float* stored = (kv == 0 ? k : v).data() + (static_cast<size_t>(b) * bs + s) * hd;
          for (int dim = 0; f16 && dim < hd; ++dim) {  // K transposed, V by rows
            const uint16_t h = F32ToF16(x[dim]);
            reinterpret_cast<uint16_t*>(tile)[kv == 0 ? dim * bs + s : s * hd + dim] = h;
            stored[dim] = F16ToF32Portable(h);
          }
          for (int g = 0; g < (f16 ? 0 : hd / 32); ++g) {
            uint8_t q[32];
            const uint16_t d = QuantizeBlockQ4(x.data() + 32 * g, q);
            sc[kv == 0 ? g * bs + s : s * (hd / 32) + g] = d;
            for (int j = 0; j < 32; ++j) {
              const int dim = 32 * g + j;
              stored[dim] = F16ToF32Portable(d) * static_cast<float>(q[j] - 8);
              uint8_t& byte = tile[kv == 0 ? (dim / 2) * bs + s : s * (hd / 2) + dim / 2];
              byte = static_cast<uint8_t>((dim & 1) != 0 ? (byte & 0x0f) | q[j] << 4 : (byte & 0xf0) | q[j]);
            }
          }
        }
      }
    }
    table.resize(n_blocks);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
  }

  // position j's stored value (logical position j lives in block table[j / bs])
  double Elem(int64_t j, int d, bool key) const {
    const int64_t bs = lay.block_size, hd = lay.head_dim;
    return (key ? k : v)[(static_cast<size_t>(table[j / bs]) * bs + j % bs) * hd + d];
  }
};

// Q4_0 tiles read in place by both kernel tables against a double reference
// over the stored values: GQA groups of 1-4 heads, head_dim 32/64/128, block
// sizes with and without whole groups of 8 keys, contexts ending mid-block,
// sliding windows, a softcap; K and V both Q4_0, or one of them F16
// (kv_type_v). Each head is bitwise the same whatever group it is computed
// in.
TEST(KvQ4, AttentionKernelReadsQ4InPlace) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const std::vector<const cpu::Kernels*> tables = {&cpu::GenericKernels(), &cpu::BestKernels()};
  const KvElem types[][2] = {{KvElem::kQ4, KvElem::kQ4}, {KvElem::kQ4, KvElem::kF16}, {KvElem::kF16, KvElem::kQ4}};
  for (const auto& t : types)
  for (int hd : {32, 64, 128}) {
    for (int bs : {16, 5}) {
      const int n_blocks = 70 / bs + 2;
      Q4Pool pool(hd, bs, n_blocks, rng, t[0], t[1]);
      SCOPED_TRACE("K " + std::to_string(static_cast<int>(t[0])) + " V " + std::to_string(static_cast<int>(t[1])));
      cpu::AttnArgs a;
      a.pool = pool.bytes.data();
      a.elem_k = t[0];
      a.elem_v = t[1];
      a.block_stride = pool.lay.block_bytes();
      a.k_tile_bytes = pool.lay.k_tile_bytes();
      a.v_tile_bytes = pool.lay.v_tile_bytes();
      a.k_scales_offset = pool.lay.k_scales_offset();
      a.v_scales_offset = pool.lay.v_scales_offset();
      a.k_offset = pool.lay.KOffset(0, 0);
      a.v_offset = pool.lay.VOffset(0, 0);
      a.block_table = pool.table.data();
      a.block_size = bs;
      a.head_dim = hd;
      a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
      for (float cap : {0.0f, 5.0f}) {
        a.softcap = cap;
        for (int64_t n_keys : {1, 9, 70}) {
          for (int64_t first : {int64_t{0}, n_keys / 3}) {
            a.n_keys = n_keys;
            a.first_key = first;
            for (int n_q : {1, 3, 4}) {
              std::vector<float> q(static_cast<size_t>(n_q) * hd);
              for (float& x : q) x = dist(rng);
              for (const cpu::Kernels* kt : tables) {
                std::vector<float> scores(static_cast<size_t>(n_q) * n_keys), out(q.size());
                kt->attention(a, n_q, q.data(), scores.data(), out.data());
                for (int g = 0; g < n_q; ++g) {
                  std::vector<double> s;
                  double mx = -1e300;
                  for (int64_t j = first; j < n_keys; ++j) {
                    double dot = 0;
                    for (int d = 0; d < hd; ++d) dot += static_cast<double>(q[g * hd + d]) * pool.Elem(j, d, true);
                    dot *= a.scale;
                    if (cap > 0) dot = cap * std::tanh(dot / cap);
                    s.push_back(dot);
                    mx = std::max(mx, s.back());
                  }
                  double z = 0;
                  for (double& x : s) z += x = std::exp(x - mx);
                  for (int d = 0; d < hd; ++d) {
                    double want = 0;
                    for (int64_t j = first; j < n_keys; ++j) want += s[j - first] * pool.Elem(j, d, false);
                    ASSERT_NEAR(out[g * hd + d], want / z, 2e-5)
                        << kt->name << " hd " << hd << " bs " << bs << " cap " << cap << " n_keys " << n_keys
                        << " first " << first << " n_q " << n_q << " head " << g;
                  }
                  std::vector<float> s1(n_keys), o1(hd);
                  kt->attention(a, 1, q.data() + g * hd, s1.data(), o1.data());
                  ASSERT_EQ(0, std::memcmp(o1.data(), out.data() + g * hd, hd * sizeof(float)))
                      << kt->name << " head " << g;
                }
              }
            }
          }
        }
      }
    }
  }
}

// ------------------------------------------------------------ contexts

struct Ctx {
  llm_ctx* ctx = nullptr;
  ~Ctx() { llm_ctx_destroy(ctx); }
};

llm_status Create(const std::string& path, int32_t kv_type, int32_t backend, Ctx* c) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.backend = backend;
  p.model_path = path.c_str();
  p.n_threads = 2;
  p.n_ctx = 256;
  p.kv_type = kv_type;
  return llm_ctx_create(&p, &c->ctx);
}

std::string Synth(const std::string& shape) {
  const std::string path = ::testing::TempDir() + "/llmrt_kvq4_" + shape + "_" + std::to_string(::getpid()) + ".gguf";
  synth::SynthOptions o;
  o.seed = 99;
  const synth::SynthShape* s = synth::FindSynthShape(shape);
  EXPECT_NE(s, nullptr) << shape;
  if (s == nullptr) return {};
  const Status st = synth::WriteSynthModel(*s, o, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

uint64_t BytesPerBlock(const std::string& path, int32_t kv_type) {
  Ctx c;
  EXPECT_EQ(Create(path, kv_type, LLM_BACKEND_CPU, &c), LLM_OK) << llm_last_error();
  if (c.ctx == nullptr) return 0;
  llm_stats s{};
  s.struct_size = sizeof(s);
  EXPECT_EQ(llm_get_stats(c.ctx, &s), LLM_OK);
  EXPECT_GT(s.kv_blocks_total, 0);
  EXPECT_EQ(s.kv_pool_bytes % static_cast<uint64_t>(s.kv_blocks_total), 0u);
  return s.kv_pool_bytes / static_cast<uint64_t>(std::max<int32_t>(s.kv_blocks_total, 1));
}

// Prompt log-probabilities of token ids (n_ctx 256).
std::vector<float> PromptLogprobs(const std::string& path, int32_t kv_type, const std::vector<llm_token>& ids) {
  Ctx c;
  EXPECT_EQ(Create(path, kv_type, LLM_BACKEND_CPU, &c), LLM_OK) << llm_last_error();
  if (c.ctx == nullptr) return {};
  return test::PromptLogprobs(c.ctx, ids.data(), static_cast<int32_t>(ids.size()));
}

// llama.cpp's CPU attention reads the query as Q8_0 blocks against Q4_0 and
// Q8_0 keys (act_rounding.h, PeerQueryRounding); LLM_CPU_ACT=own keeps it F32.
// On F32 weights no other rounding depends on LLM_CPU_ACT, so: with F32 or
// F16 keys both settings give bitwise the same log-probabilities; with Q4_0
// or Q8_0 keys they differ, by less than the cache's own rounding moves
// them from F32's (a Q8_0 query is 2^-8 relative, the keys are coarser). Head_dim 32
// (tiny-qwen3: keys not rotated) and 64 (tiny-qwen3moe-k: Q4_0 keys
// rotated, the query rounded after its rotation; Q8_0's in llama.cpp's
// rotated basis).
TEST(KvQ4, QueryRoundedAsQ8_0AgainstQuantizedKeys) {
  for (const char* shape : {"tiny-qwen3", "tiny-qwen3moe-k"}) {
    const std::string path =
        ::testing::TempDir() + "/llmrt_kvq4_query_" + shape + "_" + std::to_string(::getpid()) + ".gguf";
    synth::SynthOptions o;
    o.seed = 7;
    o.type = TensorType::F32;
    ASSERT_TRUE(synth::WriteSynthModel(*synth::FindSynthShape(shape), o, path).ok()) << shape;
    std::vector<llm_token> ids;
    for (int i = 0; i < 96; ++i) ids.push_back(static_cast<llm_token>(3 + (i * 37 + i * i) % 290));
    const std::vector<float> f32 = PromptLogprobs(path, LLM_KV_F32, ids);
    ASSERT_EQ(f32.size(), ids.size() - 1) << shape;
    for (int32_t t : {LLM_KV_F32, LLM_KV_F16, LLM_KV_Q8_0, LLM_KV_Q4_0}) {
      const std::vector<float> peer = PromptLogprobs(path, t, ids);
      setenv("LLM_CPU_ACT", "own", 1);
      const std::vector<float> own = PromptLogprobs(path, t, ids);
      unsetenv("LLM_CPU_ACT");
      ASSERT_EQ(peer.size(), f32.size());
      ASSERT_EQ(own.size(), f32.size());
      double moved = 0, cache = 0;
      for (size_t i = 0; i < f32.size(); ++i) {
        moved = std::max(moved, std::fabs(static_cast<double>(peer[i]) - own[i]));
        cache = std::max(cache, std::fabs(static_cast<double>(own[i]) - f32[i]));
      }
      std::printf("%s kv_type %d: query rounding moves log p by up to %.2e (the cache itself %.2e)\n", shape, t, moved,
                  cache);
      if (t == LLM_KV_F32 || t == LLM_KV_F16) {
        EXPECT_EQ(std::memcmp(peer.data(), own.data(), peer.size() * sizeof(float)), 0) << shape << " kv_type " << t;
      } else {
        EXPECT_GT(moved, 1e-6) << shape << " kv_type " << t << ": the query is not rounded";
        EXPECT_LT(moved, cache) << shape << " kv_type " << t;
      }
    }
    std::filesystem::remove(path);
  }
}

// Q4_0 holds 32 values in 18 bytes (GGUF's block): 18 / 128 of F32's bytes,
// 18 / 64 of F16's (tiny-qwen3: head_dim 32; block size 16).
TEST(KvQ4, BytesPerTokenFollowTheType) {
  const std::string path = Synth("tiny-qwen3");
  const uint64_t f32 = BytesPerBlock(path, LLM_KV_F32), q4 = BytesPerBlock(path, LLM_KV_Q4_0);
  EXPECT_GT(q4, 0u);
  EXPECT_EQ(q4 * 128, f32 * 18);
  std::filesystem::remove(path);
}

// A head_dim that is not a multiple of 32 (tiny-llama3: 16; stories260K: 8)
// cannot hold Q4_0 blocks: UNSUPPORTED with the reason. CUDA refuses it
// too (test_cuda_kv_types.cpp checks the reason where a device exists).
TEST(KvQ4, RefusedWhereBlocksDoNotFit) {
  const std::string path = Synth("tiny-llama3");
  Ctx c;
  EXPECT_EQ(Create(path, LLM_KV_Q4_0, LLM_BACKEND_CPU, &c), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(llm_last_error()).find("head_dim"), std::string::npos) << llm_last_error();
  EXPECT_EQ(c.ctx, nullptr);
  std::filesystem::remove(path);
  Ctx g;
  const llm_status st = Create(test::ModelPathF32(), LLM_KV_Q4_0, LLM_BACKEND_CUDA, &g);
  EXPECT_NE(st, LLM_OK);
  EXPECT_EQ(g.ctx, nullptr);
}

// Prompt log-probabilities of 256 tokens of text through Q4_0 KV against
// F32 KV on SmolLM2-135M (head_dim 64): perplexity within 8% (llama.cpp's
// own Q4_0 KV moves this model's by +4.0%, bench/results/2026-11-27-kv-types.md).
TEST(KvQ4, SmolLM2PromptLogprobsNearF32) {
  const std::string path = test::RealModelPath(test::kSmolLM2);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "SmolLM2 not fetched (scripts/fetch-models.sh)";
  const std::string text =
      "The paged KV cache keeps each sequence's keys and values in fixed-size blocks, so a request that grows "
      "takes one more block instead of copying its whole cache. Blocks shared by two requests with the same "
      "prefix are counted, and a write to a shared block first copies it. When memory runs out, the scheduler "
      "preempts the newest request and either recomputes it later or swaps its blocks to host memory. The "
      "attention kernels read the blocks through a table of block ids, one per sixteen positions, and the "
      "element type of the cache decides how many bytes each position takes: four for F32, two for F16, a "
      "little over one for Q8_0 and a little over half for Q4_0, whose blocks of thirty-two values share one "
      "half-precision scale. Quantizing the cache trades a small loss of accuracy for room: a longer context, "
      "or more requests at once.";
  std::vector<float> lp[2];
  int idx = 0;
  for (int32_t t : {LLM_KV_F32, LLM_KV_Q4_0}) {
    Ctx c;
    ASSERT_EQ(Create(path, t, LLM_BACKEND_CPU, &c), LLM_OK) << llm_last_error();
    std::vector<llm_token> ids(512);
    int32_t n = 0;
    ASSERT_EQ(llm_tokenize(c.ctx, text.data(), text.size(), LLM_TOKENIZE_ADD_SPECIAL, ids.data(), 512, &n), LLM_OK);
    ASSERT_GE(n, 100);
    ids.resize(static_cast<size_t>(n));
    lp[idx] = test::PromptLogprobs(c.ctx, ids.data(), n);
    ASSERT_FALSE(lp[idx++].empty());
  }
  ASSERT_EQ(lp[0].size(), lp[1].size());
  double sum0 = 0, sum1 = 0;
  for (size_t i = 0; i < lp[0].size(); ++i) {
    sum0 += lp[0][i];
    sum1 += lp[1][i];
  }
  const double ratio = std::exp(-(sum1 - sum0) / static_cast<double>(lp[0].size()));
  std::printf("SmolLM2 Q4_0 KV: perplexity ratio to F32 %.5f over %zu tokens\n", ratio, lp[0].size());
  EXPECT_LT(std::fabs(ratio - 1), 0.08);
}

}  // namespace
}  // namespace llm
