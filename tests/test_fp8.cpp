// FP8 E4M3 (util/fp8.h) and the KV cache's FP8 blocks (backend/kv_wire.h
// QuantizeBlockFp8, kvstate DecodeKvRow / EncodeKvRow / CheckKvBlockValues)
// on the host, no model: the codec bit for bit against ml_dtypes'
// float8_e4m3fn (tests/data/fp8_e4m3_vectors.inc, tools/
// gen_fp8_e4m3_vectors.py) for all 256 bytes and every rounding midpoint;
// saturation and NaN by the KV cache's rule; the per-block scale; the
// checks a reader makes before computing from a stream's FP8 blocks; the
// CPU's refusal of an FP8 pool.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/kv_wire.h"
#include "kvstate/kv_convert.h"
#include "llm.h"
#include "support/api_helpers.h"
#include "util/fp8.h"

namespace llm {
namespace {

#include "data/fp8_e4m3_vectors.inc"

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Fp8E4M3, DecodesEveryByteAsMlDtypes) {
  for (int b = 0; b < 256; ++b) {
    const float want = FromBits(kE4M3Value[b]), got = E4M3ToF32(static_cast<uint8_t>(b));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "byte " << b;
      EXPECT_EQ(b & 0x7f, 0x7f) << "byte " << b;
    } else {
      EXPECT_EQ(Bits(got), kE4M3Value[b]) << "byte " << b << ": " << got << " vs " << want;
    }
  }
  EXPECT_EQ(E4M3ToF32(kE4M3MaxCode), kE4M3Max);
  EXPECT_EQ(E4M3ToF32(1), std::ldexp(1.0f, -9));  // the smallest subnormal
}

TEST(Fp8E4M3, EncodesEveryMidpointAsMlDtypes) {
  int ties = 0;
  for (int i = 0; i < kE4M3Cases; ++i) {
    const float x = FromBits(kE4M3In[i]);
    ASSERT_EQ(F32ToE4M3(x), kE4M3Out[i]) << "input " << x << " (0x" << std::hex << kE4M3In[i] << ")";
    // a tie sits halfway: the even code (mantissa bit 0 clear) wins
    const uint8_t q = kE4M3Out[i];
    if ((q & 0x7f) > 0 && (q & 0x7f) < 0x7e) {
      const float lo = E4M3ToF32(static_cast<uint8_t>(q - 1)), hi = E4M3ToF32(static_cast<uint8_t>(q + 1));
      const float v = E4M3ToF32(q);
      if (std::fabs(x) != std::fabs(v) && (2 * std::fabs(x) == std::fabs(lo) + std::fabs(v) ||
                                           2 * std::fabs(x) == std::fabs(hi) + std::fabs(v))) {
        EXPECT_EQ(q & 1, 0) << "a tie went to the odd code: " << x;
        ++ties;
      }
    }
  }
  EXPECT_GT(ties, 200) << "the table's midpoints";
}

// Beyond the largest finite value the KV cache saturates (ml_dtypes would
// give NaN past 464); NaN is stored as 0.
TEST(Fp8E4M3, SaturatesAndStoresNaNAsZero) {
  for (float x : {448.0f, 449.0f, 463.9f, 464.0f, 480.0f, 1e6f, 3e38f, std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(F32ToE4M3(x), 0x7e) << x;
    EXPECT_EQ(F32ToE4M3(-x), 0xfe) << -x;
  }
  EXPECT_EQ(F32ToE4M3(std::nanf("")), 0);
  EXPECT_EQ(F32ToE4M3(-std::nanf("")), 0);
  EXPECT_EQ(F32ToE4M3(std::ldexp(1.0f, -10)), 0);        // half the smallest subnormal: ties to even 0
  EXPECT_EQ(F32ToE4M3(std::ldexp(1.5f, -10)), 1);        // above it
  EXPECT_EQ(F32ToE4M3(std::ldexp(3.0f, -10)), 2);        // 1.5 * 2^-9: to even 2
  EXPECT_EQ(F32ToE4M3(std::ldexp(15.5f, -10)), 8);       // 7.75 * 2^-9: to 2^-6, the smallest normal
}

// A block's scale is max|x| / 448 over its own 32 values: a row whose
// blocks differ in magnitude by 2^20 keeps each block's relative error at
// E4M3's (half a step: 2^-4 of the value), where one scale per row would
// flush the small block to zero.
TEST(Fp8E4M3, BlocksScaleApart) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  const int hd = 128;
  KvWireLayout w{1, 1, hd, 4, kKvWireFp8};
  EXPECT_EQ(w.TileBytes(kKvWireFp8), 4 * (hd / 32) * 36);
  EXPECT_EQ(w.block_bytes(), 2 * 4 * (hd / 32) * 36);
  std::vector<uint8_t> tile(static_cast<size_t>(w.tile_bytes(0)));
  std::vector<float> x(hd), y(hd);
  for (int p = 0; p < 4; ++p) {
    for (int d = 0; d < hd; ++d) x[d] = nd(rng) * std::ldexp(1.0f, (d / 32) * 20 - 30);
    kvstate::EncodeKvRow(w, 0, tile.data(), p, x.data());
    kvstate::DecodeKvRow(w, 0, tile.data(), p, y.data());
    for (int b = 0; b < hd / 32; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
      float scale;
      std::memcpy(&scale, tile.data() + (p * (hd / 32) + b) * 36, 4);
      EXPECT_EQ(scale, amax / 448.0f) << "row " << p << " block " << b;
      for (int j = 0; j < 32; ++j) {
        const float v = x[b * 32 + j], got = y[b * 32 + j];
        // within half a step of E4M3 at |v| (relative 2^-4), or of the
        // subnormal step 2^-9 * scale for the smallest values
        const float tol = std::max(std::fabs(v) / 16.0f, scale * std::ldexp(1.0f, -10)) * 1.0001f;
        EXPECT_LE(std::fabs(got - v), tol) << "row " << p << " value " << b * 32 + j;
      }
    }
  }
}

// Infinities saturate to +-448 * scale (the scale from the finite values),
// NaN reads back 0, an all-zero block has scale 0: the scale is always
// finite and >= 0, so the block passes a reader's checks.
TEST(Fp8E4M3, NonFiniteValuesKeepTheScaleFinite) {
  float x[32], y[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j) - 10.0f;
  x[3] = std::numeric_limits<float>::infinity();
  x[4] = -std::numeric_limits<float>::infinity();
  x[5] = std::nanf("");
  uint8_t blk[36];
  QuantizeBlockFp8(x, blk);
  float scale;
  std::memcpy(&scale, blk, 4);
  EXPECT_EQ(scale, 21.0f / 448.0f);
  EXPECT_EQ(blk[4 + 3], 0x7e);
  EXPECT_EQ(blk[4 + 4], 0xfe);
  EXPECT_EQ(blk[4 + 5], 0x00);
  EXPECT_EQ(blk[4 + 31], 0x7e);  // 21 = max: exactly 448
  KvWireLayout w{1, 1, 32, 1, kKvWireFp8};
  std::vector<uint8_t> block(static_cast<size_t>(w.block_bytes()), 0);
  std::memcpy(block.data(), blk, 36);
  EXPECT_TRUE(kvstate::CheckKvBlockValues(w, block).ok());
  kvstate::DecodeKvRow(w, 0, blk, 0, y);
  EXPECT_EQ(y[5], 0.0f);
  for (int j = 0; j < 32; ++j) x[j] = 0.0f;
  QuantizeBlockFp8(x, blk);
  std::memcpy(&scale, blk, 4);
  EXPECT_EQ(scale, 0.0f);
}

// What no writer stores is refused before any pool computes from it: a
// scale that is NaN, infinite or negative, a byte with the NaN code; on
// K's side or V's, in any layer and head.
TEST(Fp8E4M3, ReaderRefusesCorruptBlocks) {
  KvWireLayout w{2, 2, 64, 4, kKvWireFp8, LLM_KV_F16};  // K FP8, V F16
  std::vector<uint8_t> good(static_cast<size_t>(w.block_bytes()));
  std::vector<float> x(64);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (int l = 0; l < 2; ++l)
    for (int kv = 0; kv < 2; ++kv)
      for (int h = 0; h < 2; ++h)
        for (int p = 0; p < 4; ++p) {
          for (auto& v : x) v = nd(rng);
          kvstate::EncodeKvRow(w, kv, good.data() + w.TileOffset(l, kv, h), p, x.data());
        }
  ASSERT_TRUE(kvstate::CheckKvBlockValues(w, good).ok());
  const int64_t at = w.TileOffset(1, 0, 1) + 36 * 5;  // layer 1, K, head 1, row 2's second block
  auto with_scale = [&](float s) {
    std::vector<uint8_t> b = good;
    std::memcpy(b.data() + at, &s, 4);
    return kvstate::CheckKvBlockValues(w, b);
  };
  for (float s : {std::nanf(""), std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  -1.0f, -0.5f}) {
    const Status st = with_scale(s);
    EXPECT_EQ(st.code(), LLM_ERR_KV_CORRUPT) << s;
    EXPECT_NE(st.message().find("FP8 E4M3 K block"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("layer 1, kv head 1, row 2"), std::string::npos) << st.message();
  }
  EXPECT_TRUE(with_scale(0.0f).ok());
  EXPECT_TRUE(with_scale(1e30f).ok());
  for (uint8_t code : {uint8_t{0x7f}, uint8_t{0xff}}) {
    std::vector<uint8_t> b = good;
    b[static_cast<size_t>(at + 4 + 17)] = code;
    const Status st = kvstate::CheckKvBlockValues(w, b);
    EXPECT_EQ(st.code(), LLM_ERR_KV_CORRUPT);
    EXPECT_NE(st.message().find("NaN code"), std::string::npos) << st.message();
  }
  // V's side: F16 tiles read any bits (an F16 NaN is not checked here)
  std::vector<uint8_t> b = good;
  std::memset(b.data() + w.TileOffset(0, 1, 0), 0xff, 8);
  EXPECT_TRUE(kvstate::CheckKvBlockValues(w, b).ok());
  // V FP8 too: its scale is checked
  KvWireLayout wv{1, 1, 32, 1, LLM_KV_F16, kKvWireFp8};
  std::vector<uint8_t> bv(static_cast<size_t>(wv.block_bytes()), 0);
  const float neg = -2.0f;
  std::memcpy(bv.data() + wv.TileOffset(0, 1, 0), &neg, 4);
  const Status st = kvstate::CheckKvBlockValues(wv, bv);
  EXPECT_EQ(st.code(), LLM_ERR_KV_CORRUPT);
  EXPECT_NE(st.message().find("FP8 E4M3 V block holds a negative scale"), std::string::npos) << st.message();
}

// An FP8 pool is a CUDA one (sm_89+): the CPU backend refuses it by name,
// for K or for V, and names no other cause.
TEST(Fp8E4M3, CpuRefusesAnFp8Pool) {
  const std::string path = test::ModelPathF32();
  for (int side = 0; side < 2; ++side) {
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    p.model_path = path.c_str();
    p.backend = LLM_BACKEND_CPU;
    (side == 0 ? p.kv_type : p.kv_type_v) = LLM_KV_FP8_E4M3;
    llm_ctx* ctx = nullptr;
    EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_UNSUPPORTED) << side;
    EXPECT_EQ(ctx, nullptr);
    EXPECT_NE(std::string(llm_last_error()).find("kv_type fp8_e4m3 is a CUDA KV cache"), std::string::npos)
        << llm_last_error();
  }
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = path.c_str();
  p.kv_type = LLM_KV_FP8_E4M3 + 1;
  llm_ctx* ctx = nullptr;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace llm
