// The forward pass on the GPU, over one batch of tokens from any mix of
// sequences (backend.h), for every decoder family the CPU backend runs. Same
// order as the CPU reference (cpu/forward.cpp); the [bracketed] steps are a
// family's, chosen per layer from the config:
//
//   x = embed(tokens)                       [Gemma: * sqrt(n_embd)]
//   for each layer:
//     xn = rmsnorm(x += delta)              (delta: the previous sub-block's output; none before layer 0)
//     qkv = xn·[Wq;Wk;Wv]ᵀ                  [Qwen2, gpt-oss: + biases] [Gemma 3, Qwen3: q, k RMS-normed per head]
//     rope(q, k) ; store k, v in the pool   [local layers: their own RoPE base]
//     att = attention(q, pool)              decode kernel (few queries) / tensor-core prefill kernel
//                                           [local layers: a sliding window; Gemma 2: soft-capped scores]
//                                           [gpt-oss: a sink logit per head in each softmax's sum]
//     delta = att·Woᵀ                       [gpt-oss: + bo] [Gemma: delta = rmsnorm(delta)]
//     xn = rmsnorm(x += delta) ; gu = xn·[Wg;Wu]ᵀ ; h = act(g)*u ; delta = h·Wdᵀ
//                                           (act: silu, Gemma: gelu) [Gemma: delta = rmsnorm(delta)]
//                                           [MoE: delta = Σ_chosen w_e · expert_e(xn), cuda_moe.cpp;
//                                            gpt-oss: biased router and experts, clamped SwiGLU]
//   logits = rmsnorm(x[logit_rows] + delta[logit_rows]) · Woutᵀ   [soft-capped if the model says]  -> host
//
// Everything runs on one stream; Forward returns after the logits are on the host.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <string>

#include "add_bias.cuh"
#include "attention_decode.cuh"
#include "backend/cuda/cuda_backend.h"
#include "backend/kv_rotation.h"
#include "dequant.cuh"
#include "embedding.cuh"
#include "hadamard.cuh"
#include "quant_gemv.cuh"
#include "rmsnorm.cuh"
#include "rope_kv.cuh"
#include "silu_mul.cuh"
#include "softcap.cuh"

namespace llm::cuda {

Status CudaBackend::Launched(cudaError_t e, const char* what, int layer) {
  if (e == cudaSuccess && debug_) e = cudaStreamSynchronize(stream_);
  if (e == cudaSuccess) return Status::Ok();
  const std::string w = layer >= 0 ? std::string(what) + " (layer " + std::to_string(layer) + ")" : std::string(what);
  return CudaStatus(e, w.c_str());
}

Status CudaBackend::Gemm(const bf16* w, int64_t rows, int64_t cols, const bf16* x, int64_t n, float* y,
                         const char* what, int64_t ldy) {
  // Row-major y (n, rows) is column-major yᵀ (rows, n) = W (rows, cols) · xᵀ (cols, n);
  // row-major W is column-major Wᵀ, hence OP_T on it.
  const float alpha = 1.0f, beta = 0.0f;
  LLM_CUBLAS_TRY(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n),
                              static_cast<int>(cols), &alpha, w, CUDA_R_16BF, static_cast<int>(cols), x, CUDA_R_16BF,
                              static_cast<int>(cols), &beta, y, CUDA_R_32F, static_cast<int>(ldy > 0 ? ldy : rows), CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 what);
  if (debug_) return Launched(cudaSuccess, what);
  return Status::Ok();
}

Status CudaBackend::MatMul(const DeviceMatrix& w, const bf16* x, int64_t n, float* y, const char* what, int layer) {
  if (!w.quantized()) return Gemm(w.bf16_data(), w.rows(), w.cols(), x, n, y, what);
  if (n <= 0) return Status::Ok();
  if (n <= kQuantGemvMaxRows)
    return Launched(LaunchQuantGemv(w.quant(), x, static_cast<int32_t>(n), y, stream_), what, layer);
  // Larger batches: dequantize row chunks to BF16 and let cuBLAS (tensor
  // cores) multiply them, each chunk's outputs a column range of y.
  const int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(dequant_scratch_.bytes() / sizeof(bf16)) / w.cols());
  bf16* scratch = dequant_scratch_.get<bf16>();
  for (int64_t r0 = 0; r0 < w.rows(); r0 += chunk) {
    const int64_t nr = std::min(chunk, w.rows() - r0);
    LLM_RETURN_IF_ERROR(Launched(
        LaunchDequantRows(w.quant(), static_cast<int32_t>(r0), static_cast<int32_t>(nr), scratch, stream_), what, layer));
    LLM_RETURN_IF_ERROR(Gemm(scratch, nr, w.cols(), x, n, y + r0, what, w.rows()));
  }
  return Status::Ok();
}

PagedKv CudaBackend::LayerKv(int layer) {
  PagedKv kv;
  // The pool holds layers [first_layer, n_layers) from its layer 0.
  kv.k = kv_pool_.get<unsigned char>() + kv_.KOffset(layer - opt_.first_layer);
  kv.v = kv_pool_.get<unsigned char>() + kv_.VOffset(layer - opt_.first_layer);
  kv.block_stride = kv_.block_bytes();
  kv.tile_bytes = kv_.tile_bytes(0);
  kv.tile_bytes_v = kv_.tile_bytes(1);
  kv.block_size = kv_.block_size;
  kv.elem = kv_.Elem(0);
  kv.elem_v = kv_.Elem(1);
  return kv;
}

Status CudaBackend::Attention(int layer, const StepView& v) {
  const int32_t* meta = v.meta;
  const PagedKv kv = LayerKv(layer);
  // The config's scale, as the CPU backend takes it: 1/sqrt(head_dim) unless
  // the model says otherwise (Gemma 3 27B's query_pre_attn_scalar, any file
  // whose head_dim is not the one its training scaled by).
  const float scale = cfg_.AttnScale();
  const int32_t window = cfg_.IsLocalLayer(layer) ? cfg_.sliding_window : 0;  // 0: every key
  const float softcap = cfg_.attn_logit_softcap;
  const float* sinks = cfg_.attn_sinks ? layers_[layer].sinks.get<float>() : nullptr;  // gpt-oss
  if (v.n_dec > 0) {
    DecodeAttnParams p;
    p.q = q_.get<bf16>();
    p.out = att_.get<bf16>();
    p.items = meta + v.off.dec_items;
    p.n_items = v.n_dec;
    p.tok_seq = meta + v.off.tok_seq;
    p.tok_pos = meta + v.off.tok_pos;
    p.seqs = reinterpret_cast<const SeqDesc*>(meta + v.off.seqs);
    p.block_tables = meta + v.off.tables;
    p.kv = kv;
    p.n_head = cfg_.n_head;
    p.n_head_kv = cfg_.n_head_kv;
    p.head_dim = cfg_.head_dim;
    p.scale = scale;
    p.window = window;
    p.softcap = softcap;
    p.sinks = sinks;
    p.n_splits = v.dec_splits;
    p.keys_per_split = v.dec_keys_per_split;
    p.dynamic_split = v.dec_dynamic;
    LLM_RETURN_IF_ERROR(
        Launched(LaunchDecodeAttention(p, dec_ws_.get(), dec_ws_.bytes(), stream_), "decode attention", layer));
  }
  if (v.n_work > 0) {
    PrefillAttnParams p;
    p.q = q_.get<bf16>();
    p.out = att_.get<bf16>();
    p.work = reinterpret_cast<const PrefillWork*>(meta + v.off.work);
    p.n_work = v.n_work;
    p.seqs = reinterpret_cast<const SeqDesc*>(meta + v.off.seqs);
    p.block_tables = meta + v.off.tables;
    p.kv = kv;
    p.n_head = cfg_.n_head;
    p.n_head_kv = cfg_.n_head_kv;
    p.head_dim = cfg_.head_dim;
    p.scale = scale;
    p.window = window;
    p.softcap = softcap;
    p.sinks = sinks;
    LLM_RETURN_IF_ERROR(Launched(LaunchPrefillAttention(p, stream_), "prefill attention", layer));
  }
  // A Q4_0 V side holds H v: each head's output comes back by H (kv_rotation.h).
  if (kv.ElemV() == kKvQ4 && KvRotationV(cfg_.head_dim) > 0)
    LLM_RETURN_IF_ERROR(Launched(LaunchHadamardBf16(att_.get<bf16>(), static_cast<int64_t>(v.n_tok) * cfg_.q_dim(),
                                                    static_cast<int32_t>(KvRotationV(cfg_.head_dim)), stream_),
                                 "V rotation back", layer));
  return Status::Ok();
}

Status CudaBackend::RunStep(const StepView& v) {
  const int32_t nt = v.n_tok;
  const int64_t n = nt;
  const int32_t* meta = v.meta;

  // ---- embedding                                   x: (n, n_embd)
  float* x = x_.get<float>();
  float* delta = delta_.get<float>();
  bf16* xn = xn_.get<bf16>();
  if (!from_hidden()) {  // else x holds the residual stream entering first_layer (RunEager)
    LLM_RETURN_IF_ERROR(Launched(
        tok_embd_.quantized()
            ? LaunchQuantEmbedding(tok_embd_.quant(), meta + v.off.tokens, nt, x, stream_, cfg_.embd_scale)
            : LaunchEmbedding(tok_embd_.bf16_data(), cfg_.n_vocab, cfg_.n_embd, meta + v.off.tokens, nt, x, stream_,
                              cfg_.embd_scale),
        "embedding"));
  }
  LLM_RETURN_IF_ERROR(Launched(LaunchRopeAngles(meta + v.off.tok_pos, nt, inv_freq_.get<double>(), cfg_.rope_dim / 2,
                                                cos_sin_.get<float>(), stream_, rope_mag_),
                               "rope angles"));
  if (cfg_.sliding_window > 0)
    LLM_RETURN_IF_ERROR(Launched(LaunchRopeAngles(meta + v.off.tok_pos, nt, inv_freq_local_.get<double>(),
                                                  cfg_.rope_dim / 2, cos_sin_local_.get<float>(), stream_,
                                                  rope_mag_local_),
                                 "local rope angles"));

  // [first, n_layers): a split model's share (FinishLogits hands x + delta
  // out when n_layers < n_layer).
  const int first = opt_.first_layer, n_layers = opt_.n_layers;
  for (int l = first; l < n_layers; ++l) {
    const Layer& L = layers_[l];
    // ---- attention block
    LLM_RETURN_IF_ERROR(Launched(LaunchAddRmsNorm(x, l == first ? nullptr : delta, L.attn_norm.get<float>(), nullptr, nt,
                                                  cfg_.n_embd, cfg_.rms_eps, xn, stream_),
                                 "attn_norm", l));
    LLM_RETURN_IF_ERROR(MatMul(L.wqkv, xn, n, qkv_.get<float>(), "qkv GEMM", l));
    RopeKvParams rp;
    rp.qkv = qkv_.get<float>();
    rp.cos_sin = cfg_.IsLocalLayer(l) ? cos_sin_local_.get<float>() : cos_sin_.get<float>();
    rp.tok_seq = meta + v.off.tok_seq;
    rp.tok_pos = meta + v.off.tok_pos;
    rp.seqs = reinterpret_cast<const SeqDesc*>(meta + v.off.seqs);
    rp.block_tables = meta + v.off.tables;
    rp.q_out = q_.get<bf16>();
    rp.kv = LayerKv(l);
    rp.n_tok = nt;
    rp.n_head = cfg_.n_head;
    rp.n_head_kv = cfg_.n_head_kv;
    rp.head_dim = cfg_.head_dim;
    rp.n_pairs = cfg_.rope_dim / 2;
    // The pairing the model config names (GGUF llama: adjacent pairs, Q/K rows
    // permuted by the converter; NEOX for architectures whose rows are not),
    // as the CPU backend's Rope reads it, never a constant that is right for
    // one family only.
    rp.neox = cfg_.rope_style == RopeStyle::kNeox ? 1 : 0;
    rp.bias = cfg_.qkv_bias ? L.bias.get<float>() : nullptr;
    rp.q_norm = cfg_.qk_norm ? L.q_norm.get<float>() : nullptr;
    rp.k_norm = cfg_.qk_norm ? L.k_norm.get<float>() : nullptr;
    rp.eps = cfg_.rms_eps;
    // a Q4_0 side holds rotated rows (kv_rotation.h); a Q4_0 K rotates q too
    if (kv_.Elem(0) == kKvQ4) rp.rot_k = static_cast<int32_t>(KvRotationK(cfg_.head_dim));
    if (kv_.Elem(1) == kKvQ4) rp.rot_v = static_cast<int32_t>(KvRotationV(cfg_.head_dim));
    LLM_RETURN_IF_ERROR(Launched(LaunchRopeStoreKv(rp, stream_), "rope + KV store", l));
    if (l == cfg_.n_layer - 1 && v.n_out == 0) return Status::Ok();  // K/V stored, nothing more wanted
    LLM_RETURN_IF_ERROR(Attention(l, v));
    LLM_RETURN_IF_ERROR(MatMul(L.wo, att_.get<bf16>(), n, delta, "attn_output GEMM", l));
    if (cfg_.out_bias)
      LLM_RETURN_IF_ERROR(
          Launched(LaunchAddBias(delta, L.bo.get<float>(), nt, cfg_.n_embd, stream_), "attn_output bias", l));
    if (cfg_.post_norms)
      LLM_RETURN_IF_ERROR(Launched(
          LaunchRmsNormInPlace(delta, L.post_attn.get<float>(), nt, cfg_.n_embd, cfg_.rms_eps, stream_),
          "post_attention_norm", l));

    // ---- feed-forward block
    LLM_RETURN_IF_ERROR(Launched(
        LaunchAddRmsNorm(x, delta, L.ffn_norm.get<float>(), nullptr, nt, cfg_.n_embd, cfg_.rms_eps, xn, stream_),
        "ffn_norm", l));
    if (cfg_.n_expert > 0) {
      LLM_RETURN_IF_ERROR(MoeFeedForward(l, nt));  // delta = Σ w_e expert_e(xn) [+ shared expert] (cuda_moe.cpp)
    } else {
      LLM_RETURN_IF_ERROR(MatMul(L.wgu, xn, n, gu_.get<float>(), "gate/up GEMM", l));
      LLM_RETURN_IF_ERROR(Launched(LaunchSiluMul(gu_.get<float>(), nt, cfg_.n_ff, h_.get<bf16>(), stream_,
                                                 cfg_.ffn_act == FfnActivation::kGeluTanh),
                                   "act*up", l));
      LLM_RETURN_IF_ERROR(MatMul(L.wd, h_.get<bf16>(), n, delta, "ffn_down GEMM", l));
    }
    if (cfg_.post_norms)
      LLM_RETURN_IF_ERROR(Launched(
          LaunchRmsNormInPlace(delta, L.post_ffn.get<float>(), nt, cfg_.n_embd, cfg_.rms_eps, stream_),
          "post_ffw_norm", l));
  }
  if (partial()) return Status::Ok();  // residual stream: x + delta

  // ---- final norm of the logit rows and classifier  logits: (n_out, n_vocab)
  LLM_RETURN_IF_ERROR(Launched(LaunchAddRmsNorm(x, delta, out_norm_.get<float>(), meta + v.off.logit_rows, v.n_out,
                                                cfg_.n_embd, cfg_.rms_eps, xn, stream_),
                               "output_norm"));
  LLM_RETURN_IF_ERROR(MatMul(*output_w_, xn, v.n_out, logits_.get<float>(), "classifier GEMM"));
  if (cfg_.final_logit_softcap > 0.0f)
    LLM_RETURN_IF_ERROR(Launched(LaunchSoftcap(logits_.get<float>(), static_cast<int64_t>(v.n_out) * cfg_.n_vocab,
                                               cfg_.final_logit_softcap, stream_),
                                 "final logit soft-cap"));
  return Status::Ok();
}

Status CudaBackend::RunEager(const float* hidden) {
  const int64_t n = n_tok_;
  LLM_RETURN_IF_ERROR(Reserve(n, n_out_, off_.total));
  // ---- step metadata: one copy (the previous step has finished with the pinned buffer)
  std::memcpy(meta_pinned_.get(), meta_.data(), meta_.size() * sizeof(int32_t));
  LLM_CUDA_TRY(cudaMemcpyAsync(meta_dev_.get(), meta_pinned_.get(), meta_.size() * sizeof(int32_t),
                               cudaMemcpyHostToDevice, stream_),
               "upload batch metadata");
  if (hidden != nullptr) {  // x: (n, n_embd) the residual stream entering first_layer
    LLM_CUDA_TRY(cudaMemcpyAsync(x_.get(), hidden, static_cast<size_t>(n * cfg_.n_embd) * sizeof(float),
                                 cudaMemcpyHostToDevice, stream_),
                 "upload hidden states");
  }
  StepView v;
  v.meta = meta_dev_.get<int32_t>();
  v.off = off_;
  v.n_tok = static_cast<int32_t>(n);
  v.n_out = n_out_;
  v.n_dec = n_dec_;
  v.n_work = n_work_;
  PlanDecodeAttention(n_dec_, cfg_.n_head_kv, cfg_.head_dim, max_dec_keys_, n_sm_, kDecodeSlots, &v.dec_splits,
                      &v.dec_keys_per_split);
  ++graph_stats_.eager_steps;
  return RunStep(v);
}

Status CudaBackend::FinishLogits(float* logits) {
  if (partial()) {
    // The residual stream leaving the last layer here is x + delta (the next
    // norm would add them): both to the host, added there, as the device's
    // add would round them.
    const int64_t n = n_tok_ * cfg_.n_embd;
    try {
      delta_host_.resize(static_cast<size_t>(n));
    } catch (const std::bad_alloc&) {
      return OutOfMemory("CUDA backend: host buffer for hidden states");
    }
    LLM_CUDA_TRY(cudaMemcpyAsync(logits, x_.get(), static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost,
                                 stream_),
                 "copy hidden states to the host");
    LLM_CUDA_TRY(cudaMemcpyAsync(delta_host_.data(), delta_.get(), static_cast<size_t>(n) * sizeof(float),
                                 cudaMemcpyDeviceToHost, stream_),
                 "copy hidden states to the host");
    LLM_CUDA_TRY(cudaStreamSynchronize(stream_), "forward");
    for (int64_t i = 0; i < n; ++i) logits[i] += delta_host_[i];
    return Status::Ok();
  }
  if (n_out_ > 0) {
    LLM_CUDA_TRY(cudaMemcpyAsync(logits, logits_.get(), static_cast<size_t>(n_out_) * cfg_.n_vocab * sizeof(float),
                                 cudaMemcpyDeviceToHost, stream_),
                 "copy logits to the host");
  }
  LLM_CUDA_TRY(cudaStreamSynchronize(stream_), "forward");
  return Status::Ok();
}

// A step that fails after queuing an upload from a pinned staging buffer
// (meta_pinned_, graph_meta_pinned_, samp_pinned_) returns before the final
// cudaStreamSynchronize, and the next call rewrites that buffer with memcpy
// while the copy, queued behind the step's earlier kernels, may still be
// reading it. Waiting for the stream on the error path closes that: errors
// are rare, so it costs the steady path nothing. (Double-buffering instead
// would only move the hazard to the second failure in a row unless every
// buffer were fenced by an event.) The wait's own error adds nothing: a
// sticky error is already the step's, a transient one is the step's too.
Status CudaBackend::SettleOnError(Status st) {
  if (!st.ok() && stream_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaGetLastError();
  }
  return st;
}

Status CudaBackend::Forward(const Batch& batch, float* logits) {
  if (from_hidden())
    return InvalidArgument("CUDA backend: layers from " + std::to_string(opt_.first_layer) +
                           " on start from hidden states (ForwardFromHidden)");
  LLM_CUDA_TRY(cudaSetDevice(opt_.device), "cudaSetDevice");
  LLM_RETURN_IF_ERROR(Validate(batch, logits));  // queues nothing
  if (batch.tokens.empty()) return Status::Ok();
  bool handled = false;
  Status st = RunDecodeGraph(&handled);
  if (st.ok() && !handled) st = RunEager();
  if (st.ok()) st = FinishLogits(logits);
  return SettleOnError(std::move(st));
}

Status CudaBackend::ForwardFromHidden(const Batch& batch, const float* hidden, float* logits) {
  if (!from_hidden()) return Unsupported("CUDA backend: this backend starts at the embedding (Forward)");
  if (hidden == nullptr && !batch.tokens.empty()) return InvalidArgument("ForwardFromHidden: hidden is NULL");
  LLM_CUDA_TRY(cudaSetDevice(opt_.device), "cudaSetDevice");
  // A middle backend hands out hidden states: its output buffer is never
  // NULL (the split backend's), whatever the logit rows.
  LLM_RETURN_IF_ERROR(Validate(batch, logits, /*need_logits=*/!partial()));
  if (batch.tokens.empty()) return Status::Ok();
  if (partial() && logits == nullptr) return InvalidArgument("ForwardFromHidden: the hidden-state output is NULL");
  Status st = RunEager(hidden);
  if (st.ok()) st = FinishLogits(logits);
  return SettleOnError(std::move(st));
}

}  // namespace llm::cuda
