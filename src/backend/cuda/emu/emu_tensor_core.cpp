// EMULATE builds: the tensor-core instruction the kernels use, as a warp
// collective with the PTX ISA's register-to-element layout. Each lane hands
// in its fragments; every lane sees the warp's 16x16 A, 16x8 B and 16x8 C and
// computes its own four D elements, so a kernel that indexes a fragment
// wrongly gets wrong numbers here as on the GPU.
#include "emu_internal.h"

namespace llm::emu {
namespace {

float Bf16Lo(uint32_t r) { return __uint_as_float(r << 16); }
float Bf16Hi(uint32_t r) { return __uint_as_float(r & 0xFFFF0000u); }

struct MmaLane {
  uint32_t a[4];
  uint32_t b[2];
  float c[4];
};
static_assert(sizeof(MmaLane) <= kLanePayload);

}  // namespace

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (PTX ISA 9.7.13.4.8),
// g = lane / 4, t = lane % 4:
//   A (16x16, row-major): a0 = A[g][2t..2t+1]  a1 = A[g+8][2t..]  a2 = A[g][2t+8..]  a3 = A[g+8][2t+8..]
//   B (16x8, col-major):  b0 = B[2t..2t+1][g]  b1 = B[2t+8..2t+9][g]
//   C, D (16x8):          c0,c1 = C[g][2t, 2t+1]  c2,c3 = C[g+8][2t, 2t+1]
// Each 32-bit register holds two bf16, the lower index in the low half.
void MmaM16N8K16Bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  MmaLane mine{{a[0], a[1], a[2], a[3]}, {b0, b1}, {d[0], d[1], d[2], d[3]}};
  const WarpView w = WarpExchange(kOpMma, &mine, sizeof mine, 0xffffffffu);
  if (w.active != 0xffffffffu) Trap("mma.sync with a partial warp");
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    MmaLane l;
    std::memcpy(&l, w.lanes + static_cast<size_t>(lane) * kLanePayload, sizeof l);
    const int g = lane / 4, t = lane % 4;
    const int rows[4] = {g, g + 8, g, g + 8}, cols[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
    for (int r = 0; r < 4; ++r) {
      A[rows[r]][cols[r]] = Bf16Lo(l.a[r]);
      A[rows[r]][cols[r] + 1] = Bf16Hi(l.a[r]);
    }
    B[2 * t][g] = Bf16Lo(l.b[0]);
    B[2 * t + 1][g] = Bf16Hi(l.b[0]);
    B[2 * t + 8][g] = Bf16Lo(l.b[1]);
    B[2 * t + 9][g] = Bf16Hi(l.b[1]);
  }
  const int lane = LaneId(), g = lane / 4, t = lane % 4;
  const int out_r[4] = {g, g, g + 8, g + 8}, out_c[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
  for (int e = 0; e < 4; ++e) {
    float acc = 0.0f;
    for (int k = 0; k < 16; ++k) acc = fmaf(A[out_r[e]][k], B[k][out_c[e]], acc);
    d[e] = mine.c[e] + acc;
  }
}

}  // namespace llm::emu
