// EncoderAttention (encoder_attention.h): lay each head's K and V out as a
// one-block F32 KV pool, then run the attention kernel per (head, chunk of
// query tokens), the chunks spread over the threads.
//
//   kv:  [ head 0: K (hd, ld) | V (ld, hd) ][ head 1: ... ] ...
//   task (h, c): q rows c*C .. c*C+C-1 of head h gathered (C, hd)
//                -> kernels.attention over keys 0 .. n-1 -> scattered to out
#include "backend/cpu/encoder_attention.h"

#include <algorithm>
#include <cstring>

namespace llm::cpu {
namespace {

constexpr int64_t kQueryChunk = 16;               // queries per kernel call (the kernel's V-once group path)
constexpr int64_t kParallelMacs = 16 * 1024;      // as encoder.cpp: smaller steps stay on the caller

}  // namespace

void EncoderAttention(const Kernels& kernels, ThreadPool& pool, const EncoderAttnShape& s, const float* q,
                      const float* k, const float* v, float* out, EncoderAttnScratch* scratch) {
  const int64_t n = s.n, hd = s.head_dim, H = s.n_head;
  if (n <= 0) return;
  const int64_t ld = (n + 7) / 8 * 8;  // the tile's width: whole groups of 8 keys
  const int64_t tile = hd * ld;        // floats of one K or V tile
  const int n_threads = pool.n_threads();
  // per thread: scores (C, n), then the gathered queries and outputs (C, hd) each
  const int64_t per_thread = kQueryChunk * n + 2 * kQueryChunk * hd;
  if (scratch->kv.size() < static_cast<size_t>(2 * H * tile)) scratch->kv.resize(static_cast<size_t>(2 * H * tile));
  if (scratch->scores.size() < static_cast<size_t>(n_threads * per_thread))
    scratch->scores.resize(static_cast<size_t>(n_threads * per_thread));
  float* kv = scratch->kv.data();
  const bool parallel = n_threads > 1 && H * n * n * hd * 2 >= kParallelMacs;

  // ---- layout: K transposed (column t = token t's key), V as rows; the
  // padding columns / rows past n are zero (read by 8-wide loads, never weighted)
  auto layout = [&](int64_t b, int64_t e, int) {
    for (int64_t h = b; h < e; ++h) {
      float* kt = kv + 2 * h * tile;
      float* vt = kt + tile;
      for (int64_t t = 0; t < n; ++t) {
        const float* kr = k + t * s.ld + h * hd;
        for (int64_t d = 0; d < hd; ++d) kt[d * ld + t] = kr[d];
        std::memcpy(vt + t * hd, v + t * s.ld + h * hd, static_cast<size_t>(hd) * sizeof(float));
      }
      for (int64_t d = 0; d < hd; ++d)
        for (int64_t t = n; t < ld; ++t) kt[d * ld + t] = 0.0f;
      std::memset(vt + n * hd, 0, static_cast<size_t>((ld - n) * hd) * sizeof(float));
    }
  };
  if (parallel) {
    pool.ParallelFor(H, layout);
  } else {
    layout(0, H, 0);
  }

  // ---- attention per (head, query chunk)
  const int64_t n_chunks = (n + kQueryChunk - 1) / kQueryChunk;
  const int32_t block0 = 0;
  auto tasks = [&](int64_t b, int64_t e, int thread) {
    float* scores = scratch->scores.data() + thread * per_thread;
    float* qc = scores + kQueryChunk * n;
    float* oc = qc + kQueryChunk * hd;
    for (int64_t task = b; task < e; ++task) {
      const int64_t h = task / n_chunks, c = task % n_chunks;
      const int64_t t0 = c * kQueryChunk, cnt = std::min(kQueryChunk, n - t0);
      for (int64_t i = 0; i < cnt; ++i)
        std::memcpy(qc + i * hd, q + (t0 + i) * s.ld + h * hd, static_cast<size_t>(hd) * sizeof(float));
      AttnArgs a;
      a.pool = reinterpret_cast<const uint8_t*>(kv + 2 * h * tile);
      a.elem_k = a.elem_v = KvElem::kF32;
      a.block_stride = 0;  // one block
      a.k_tile_bytes = a.v_tile_bytes = tile * static_cast<int64_t>(sizeof(float));
      a.k_offset = 0;
      a.v_offset = a.k_tile_bytes;
      a.block_table = &block0;
      a.block_size = static_cast<int32_t>(ld);
      a.head_dim = static_cast<int32_t>(hd);
      a.n_keys = n;
      a.first_key = 0;
      a.scale = s.scale;
      kernels.attention(a, static_cast<int>(cnt), qc, scores, oc);
      for (int64_t i = 0; i < cnt; ++i)
        std::memcpy(out + (t0 + i) * s.ld + h * hd, oc + i * hd, static_cast<size_t>(hd) * sizeof(float));
    }
  };
  if (parallel) {
    pool.ParallelForDynamic(H * n_chunks, 4 * static_cast<int64_t>(n_threads), tasks);
  } else {
    tasks(0, H * n_chunks, 0);
  }
}

}  // namespace llm::cpu
