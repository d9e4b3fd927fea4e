// The loops of a block-quantized matmul over weight rows and tokens. Not a
// normal header: quant_generic.cpp includes it inside its
// own namespace after defining `QuantDotFn QuantDot(TensorType)` and
// `PackedOrderDot(TensorType)` (the summation order of a packed weight).
//
// Every output y[t][r] is one call of the row's dot function on token t's
// quantized activations, whatever the tiling: results do not depend on the
// thread split or the batch.

void QuantMatMulImpl(const MatMulArgs& a) {
  const WeightView& W = *a.w;
  // A packed weight (quant_pack.h) is read from `data` too, but summed in the
  // order of the SIMD kernels' packed path, so the two agree bitwise.
  const QuantDotFn dot = W.packed != nullptr ? PackedOrderDot(W.type) : QuantDot(W.type);
  if (dot == nullptr) return;  // rejected at backend creation
  const auto* base = static_cast<const uint8_t*>(W.data);
  const size_t rb = W.row_bytes;
  const int64_t nb = W.cols / 32;

  // Blocks of tokens keep their activations (n * nb * 40 bytes) in L1/L2 while
  // the rows sweep them; each weight row is then read from L1 for every token
  // of the block.
  constexpr int64_t kTokBlock = 16;
  for (int64_t tb = 0; tb < a.n_tok; tb += kTokBlock) {
    const int64_t te = tb + kTokBlock < a.n_tok ? tb + kTokBlock : a.n_tok;
    for (int64_t r = a.row_begin; r < a.row_end; ++r) {
      const uint8_t* w = base + r * rb;
      for (int64_t t = tb; t < te; ++t) {
        const float s = dot(w, a.xq + t * a.ld_xq, nb);
        float* dst = a.y + t * a.ld_y + r;
        *dst = a.accumulate ? *dst + s : s;
      }
    }
  }
}
