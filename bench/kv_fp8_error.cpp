// What the FP8 E4M3 KV cache's quantization does to a real model's K and V
// rows, rotated (Walsh-Hadamard, as Q4_0's: backend/kv_rotation.h) or not,
// beside Q8_0 (one scale per row) and Q4_0 (rotated): the measurement that
// chose unrotated FP8 rows (bench/results/2026-11-27-kv-fp8.md).
//
// The CPU backend computes a text's prompt with an F32 cache; its KV stream
// (llm_kv_export) holds every layer's K rows after RoPE and V rows. Each
// row is quantized and decoded by each scheme on the host (the CUDA pool's
// own rules: QuantizeBlockFp8, QuantizeRowQ8, QuantizeBlockQ4), rotated
// back where it was rotated, and compared with the F32 row:
//   rel. RMS error = sqrt(sum |x - x^|^2 / sum |x|^2) over every row of a side,
// per layer, then the mean and worst over layers; and the error of the
// attention scores q . k with the model's own later keys standing in for
// queries (both carry RoPE's outlier pairs), relative to the scores' RMS.
//
//   kv-fp8-error MODEL.gguf TEXT [N_TOKENS]
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backend/kv_rotation.h"
#include "backend/kv_wire.h"
#include "kvstate/kv_convert.h"
#include "kvstate/kv_format.h"
#include "llm.h"

namespace {

using namespace llm;

enum Scheme { kFp8, kFp8Rotated, kQ8, kQ4Rotated, kSchemes };
const char* kNames[kSchemes] = {"FP8 E4M3, per-32 scale", "FP8 E4M3, rotated", "Q8_0 (per row)", "Q4_0, rotated"};

// x -> the scheme's stored row, decoded and rotated back.
void RoundTrip(Scheme s, const float* x, int64_t hd, int64_t rot, float* y) {
  std::vector<float> r(x, x + hd);
  const bool rotated = s == kFp8Rotated || s == kQ4Rotated;
  if (rotated) HadamardRotate(r.data(), hd, rot);
  if (s == kQ8) {
    std::vector<int8_t> q(static_cast<size_t>(hd));
    const float scale = QuantizeRowQ8(r.data(), hd, q.data(), 1);
    for (int64_t d = 0; d < hd; ++d) y[d] = scale * q[d];
    return;
  }
  for (int64_t b = 0; b < hd / 32; ++b) {
    if (s == kQ4Rotated) {
      uint8_t q[32];
      const float dd = F16ToF32(QuantizeBlockQ4(r.data() + b * 32, q));
      for (int j = 0; j < 32; ++j) y[b * 32 + j] = dd * static_cast<float>(static_cast<int>(q[j]) - 8);
    } else {
      uint8_t blk[36];
      QuantizeBlockFp8(r.data() + b * 32, blk);
      float scale;
      std::memcpy(&scale, blk, 4);
      for (int j = 0; j < 32; ++j) y[b * 32 + j] = scale * E4M3ToF32(blk[4 + j]);
    }
  }
  if (rotated) HadamardRotate(y, hd, rot);
}

int32_t Append(void* user, const void* data, size_t n) {
  static_cast<std::string*>(user)->append(static_cast<const char*>(data), n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: kv-fp8-error MODEL.gguf TEXT [N_TOKENS]\n");
    return 2;
  }
  const int n_want = argc > 3 ? std::atoi(argv[3]) : 256;
  std::ifstream f(argv[2]);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();

  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = argv[1];
  p.backend = LLM_BACKEND_CPU;
  p.kv_type = LLM_KV_F32;
  p.n_ctx = n_want + 64;
  p.n_threads = 2;
  llm_ctx* ctx = nullptr;
  if (llm_ctx_create(&p, &ctx) != LLM_OK) {
    std::fprintf(stderr, "%s\n", llm_last_error());
    return 1;
  }
  std::vector<llm_token> toks(text.size() + 8);
  int32_t n = 0;
  if (llm_tokenize(ctx, text.data(), text.size(), LLM_TOKENIZE_ADD_SPECIAL, toks.data(),
                   static_cast<int32_t>(toks.size()), &n) != LLM_OK)
    return 1;
  toks.resize(static_cast<size_t>(std::min(n, n_want)));
  // compute the prompt (one token generated), then export its cached blocks
  llm_request r;
  llm_request_init(&r);
  r.prompt_tokens = toks.data();
  r.n_prompt_tokens = static_cast<int32_t>(toks.size());
  r.max_tokens = 1;
  llm_request_id id = 0;
  if (llm_submit(ctx, &r, &id) != LLM_OK) return 1;
  for (bool done = false; !done;) {
    llm_event ev[8] = {};
    for (llm_event& e : ev) e.struct_size = sizeof e;
    uint32_t got = 0;
    if (llm_poll(ctx, ev, 8, &got, 1000) != LLM_OK) return 1;
    for (uint32_t i = 0; i < got; ++i) done = done || ev[i].type == LLM_EVENT_FINAL;
  }
  std::string stream;
  int32_t n_blocks = 0;
  if (llm_kv_export(ctx, toks.data(), static_cast<int32_t>(toks.size()), 0, Append, &stream, &n_blocks) != LLM_OK) {
    std::fprintf(stderr, "%s\n", llm_last_error());
    return 1;
  }
  size_t at = 0;
  kvstate::StreamReader rd([&](void* buf, size_t k) -> StatusOr<size_t> {
    const size_t m = std::min(k, stream.size() - at);
    std::memcpy(buf, stream.data() + at, m);
    at += m;
    return m;
  });
  kvstate::StreamHeader h;
  if (!rd.ReadHeader(&h).ok()) return 1;
  const KvWireLayout w = h.geometry.wire();
  const int64_t hd = w.head_dim, L = w.n_layer, H = w.n_head_kv;
  // rows[layer][side][head] = (positions, hd)
  std::vector<std::vector<float>> rows(static_cast<size_t>(L * 2 * H));
  kvstate::BlockRecord rec;
  int64_t n_pos = 0;
  while (true) {
    StatusOr<bool> more = rd.NextBlock(&rec);
    if (!more.ok() || !*more) break;
    for (int64_t l = 0; l < L; ++l)
      for (int64_t kv = 0; kv < 2; ++kv)
        for (int64_t hh = 0; hh < H; ++hh) {
          std::vector<float>& dst = rows[static_cast<size_t>((l * 2 + kv) * H + hh)];
          for (int64_t pp = 0; pp < w.block_size; ++pp) {
            const size_t o = dst.size();
            dst.resize(o + static_cast<size_t>(hd));
            kvstate::DecodeKvRow(w, kv, rec.kv.data() + w.TileOffset(l, kv, hh), pp, dst.data() + o);
          }
        }
    n_pos += w.block_size;
  }
  std::printf("model %s: %lld layers, %lld kv heads, head_dim %lld; %lld positions (%d exported)\n", argv[1],
              static_cast<long long>(L), static_cast<long long>(H), static_cast<long long>(hd),
              static_cast<long long>(n_pos), n_blocks);
  std::printf("| scheme | K rel. RMS (mean / worst layer) | V rel. RMS (mean / worst) | score error (mean / worst) |\n");
  std::printf("| --- | --- | --- | --- |\n");
  for (int s = 0; s < kSchemes; ++s) {
    double mean[3] = {}, worst[3] = {};
    for (int64_t l = 0; l < L; ++l) {
      double num[2] = {}, den[2] = {}, snum = 0, sden = 0;
      for (int64_t kv = 0; kv < 2; ++kv)
        for (int64_t hh = 0; hh < H; ++hh) {
          const std::vector<float>& x = rows[static_cast<size_t>((l * 2 + kv) * H + hh)];
          std::vector<float> y(x.size());
          const int64_t rot = kv == 0 ? KvRotationK(hd) : KvRotationV(hd);
          for (int64_t pp = 0; pp < n_pos; ++pp) {
            RoundTrip(static_cast<Scheme>(s), x.data() + pp * hd, hd, rot, y.data() + pp * hd);
            for (int64_t d = 0; d < hd; ++d) {
              const double e = static_cast<double>(x[pp * hd + d]) - y[pp * hd + d];
              num[kv] += e * e;
              den[kv] += static_cast<double>(x[pp * hd + d]) * x[pp * hd + d];
            }
          }
          if (kv == 0) {  // scores: key j against the "query" of a later position t (every 4th t)
            for (int64_t t = 1; t < n_pos; t += 4)
              for (int64_t j = 0; j < t; ++j) {
                double exact = 0, approx = 0;
                for (int64_t d = 0; d < hd; ++d) {
                  exact += static_cast<double>(x[t * hd + d]) * x[j * hd + d];
                  approx += static_cast<double>(x[t * hd + d]) * y[j * hd + d];
                }
                snum += (exact - approx) * (exact - approx);
                sden += exact * exact;
              }
          }
        }
      const double e[3] = {std::sqrt(num[0] / den[0]), std::sqrt(num[1] / den[1]), std::sqrt(snum / sden)};
      for (int i = 0; i < 3; ++i) {
        mean[i] += e[i] / static_cast<double>(L);
        worst[i] = std::max(worst[i], e[i]);
      }
    }
    std::printf("| %s | %.4f / %.4f | %.4f / %.4f | %.4f / %.4f |\n", kNames[s], mean[0], worst[0], mean[1], worst[1],
                mean[2], worst[2]);
  }
  llm_ctx_destroy(ctx);
  return 0;
}
