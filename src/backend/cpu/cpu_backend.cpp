#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/encoder.h"

#include "backend/validate.h"
#include "model/rope_freq.h"
#include "util/env.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <string>

namespace llm {

StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const ModelConfig& config, const ModelWeights& weights,
                                                    const KvCacheSpec& kv, int n_threads, int32_t first_layer) {
  if (config.is_encoder) {
    if (first_layer != 0) return Unsupported("an encoder model cannot be split across backends");
    return cpu::CreateCpuEncoder(config, weights, n_threads);
  }
  return cpu::CpuBackend::Create(config, weights, kv, n_threads, first_layer);
}

namespace cpu {
namespace {

// LLM_KV_* -> the pool's element type; AUTO is F16 (half of F32's bytes,
// perplexity within 0.1%: bench/results/2026-11-24-kv-type.md).
StatusOr<KvElem> KvElemOf(int32_t kv_type) {
  switch (kv_type) {
    case LLM_KV_AUTO:
    case LLM_KV_F16: return KvElem::kF16;
    case LLM_KV_F32: return KvElem::kF32;
    case LLM_KV_Q8_0: return KvElem::kQ8;
    case LLM_KV_Q4_0: return KvElem::kQ4;
    // No x86 core converts E4M3 natively: every key would pay a table lookup
    // per value for Q8_0's bytes and a larger error. Its KV streams import
    // into a CPU context of another type (kvstate/kv_convert.h).
    case LLM_KV_FP8_E4M3:
      return Unsupported("CPU backend: kv_type fp8_e4m3 is a CUDA KV cache (compute capability 8.9 or newer); "
                         "the CPU keeps F16, F32, Q8_0 or Q4_0 and imports FP8 KV streams converted");
    default: return InvalidArgument("CPU backend: unknown kv_type " + std::to_string(kv_type));
  }
}

// Bytes of a matrix's own rows (its mapped tensor), 0 when absent.
int64_t ViewBytes(const WeightView& w) { return w.empty() ? 0 : w.rows * static_cast<int64_t>(w.row_bytes); }

// first_layer > 0: the token embedding is not read (the hidden states come
// in) unless it is the tied classifier; the layers before are empty views.
int64_t WeightBytes(const ModelWeights& w, int32_t first_layer) {
  int64_t n = ViewBytes(w.output_norm) + ViewBytes(w.rope_freqs);
  if (first_layer == 0 || w.output.data == w.token_embd.data) n += ViewBytes(w.token_embd);
  if (w.output.data != w.token_embd.data) n += ViewBytes(w.output);
  for (const LayerWeights& L : w.layers) {
    for (const WeightView* v : {&L.attn_norm, &L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_norm, &L.w_gate, &L.w_up, &L.w_down,
                                &L.router, &L.shexp_gate_inp, &L.shexp_gate, &L.shexp_up, &L.shexp_down, &L.bq, &L.bk,
                                &L.bv, &L.q_norm, &L.k_norm, &L.post_attn_norm, &L.post_ffn_norm, &L.bo, &L.attn_sinks,
                                &L.router_b, &L.exp_gate_b, &L.exp_up_b, &L.exp_down_b})
      n += ViewBytes(*v);
    for (const std::vector<WeightView>* vs : {&L.exp_gate, &L.exp_up, &L.exp_down})
      for (const WeightView& v : *vs) n += ViewBytes(v);
  }
  return n;
}

Status CheckMatrix(const WeightView& w, int64_t rows, int64_t cols, const std::string& name) {
  return CheckWeightMatrix(w, rows, cols, name, "CPU backend");
}

// A norm weight (n) as F32.
StatusOr<std::vector<float>> NormToF32(const WeightView& w, int64_t n, const std::string& name) {
  if (w.empty() || w.rows * w.cols != n || (w.rows != 1 && w.cols != 1))
    return InvalidArgument("CPU backend: norm weight " + name + " missing or not of size " + std::to_string(n));
  if (w.type != TensorType::F32 && w.type != TensorType::F16 && w.type != TensorType::BF16)
    return Unsupported("CPU backend: norm weight " + name + " must be F32, F16 or BF16");
  WeightView row = w;
  row.rows = 1;
  row.cols = n;
  std::vector<float> out(n);
  DequantizeRow(row, 0, out.data());
  return out;
}

// A stack of bias rows (rows, n) — one per expert — as F32, row after row.
StatusOr<std::vector<float>> BiasesToF32(const WeightView& w, int64_t rows, int64_t n, const std::string& name) {
  if (w.empty() || w.rows != rows || w.cols != n)
    return InvalidArgument("CPU backend: bias " + name + " missing or not of shape (" + std::to_string(rows) + ", " +
                           std::to_string(n) + ")");
  if (w.type != TensorType::F32 && w.type != TensorType::F16 && w.type != TensorType::BF16)
    return Unsupported("CPU backend: bias " + name + " must be F32, F16 or BF16");
  std::vector<float> out(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r) DequantizeRow(w, r, out.data() + r * n);
  return out;
}

}  // namespace
}  // namespace cpu

int64_t CpuKvBlockBytes(const ModelConfig& c, int32_t block_size, int32_t kv_type, int32_t first_layer,
                        int32_t kv_type_v) {
  StatusOr<cpu::KvElem> k = cpu::KvElemOf(kv_type), v = cpu::KvElemOf(kv_type_v != LLM_KV_AUTO ? kv_type_v : kv_type);
  const cpu::KvElem ek = k.ok() ? *k : cpu::KvElem::kF16, ev = v.ok() ? *v : cpu::KvElem::kF16;
  return cpu::KvLayout{c.n_layer - first_layer, c.n_head_kv, c.head_dim, block_size, ek, ev}.block_bytes();
}

namespace cpu {

CpuBackend::CpuBackend(std::shared_ptr<Shared> shared, int n_threads)
    : shared_(std::move(shared)),
      cfg_(shared_->cfg),
      w_(shared_->w),
      k_(shared_->k),
      rope_(shared_->rope),
      rope_local_(shared_->rope_local),
      first_layer_(shared_->kv.first_layer),
      norms_(shared_->norms),
      kv_(shared_->kv),
      n_blocks_(shared_->n_blocks),
      capacity_(shared_->capacity),
      pool_base_(shared_->kv_pool.get()),
      pool_(n_threads) {}

StatusOr<std::unique_ptr<Backend>> CpuBackend::Create(const ModelConfig& c, const ModelWeights& w,
                                                      const KvCacheSpec& kv, int n_threads, int32_t first_layer) {
  // ---- configuration
  if (c.n_vocab <= 0 || c.n_embd <= 0 || c.n_layer <= 0 || c.n_head <= 0 || c.n_head_kv <= 0 || c.head_dim <= 0 ||
      c.n_ff <= 0)
    return InvalidArgument("CPU backend: model dimensions must be positive");
  if (c.n_head % c.n_head_kv != 0) return InvalidArgument("CPU backend: n_head must be a multiple of n_head_kv");
  if (c.head_dim > 256) return Unsupported("CPU backend: head_dim above 256");
  if (!(c.rms_eps >= 0.0f)) return InvalidArgument("CPU backend: negative rms_eps");
  if (kv.block_size <= 0 || kv.n_blocks <= 0) return InvalidArgument("CPU backend: KV block_size and n_blocks must be positive");
  if (static_cast<int64_t>(w.layers.size()) != c.n_layer) return InvalidArgument("CPU backend: weights have the wrong layer count");
  if (first_layer < 0 || first_layer >= c.n_layer)
    return InvalidArgument("CPU backend: first layer " + std::to_string(first_layer) + " outside [0, " +
                           std::to_string(c.n_layer) + ")");
  if (c.sliding_window < 0 || c.swa_pattern < 0) return InvalidArgument("CPU backend: negative sliding window");
  if (!(c.embd_scale > 0.0f) || !(c.final_logit_softcap >= 0.0f) || !(c.attn_logit_softcap >= 0.0f) ||
      c.attn_scale < 0.0f)
    return InvalidArgument("CPU backend: invalid embedding scale, attention scale or logit soft-cap");
  if (c.ffn_act == FfnActivation::kSwigluOai && !(c.n_expert > 0 && c.expert_bias))
    return Unsupported("CPU backend: the clamped SwiGLU is run for gpt-oss's biased experts only");
  // rope_freqs (Llama 3.1+) or LongRoPE's long or short factors (Phi-3.5)
  // divide every layer's frequencies, as in llama.cpp.
  LLM_ASSIGN_OR_RETURN(std::vector<float> freq_factors, RopeFreqFactors(c, RopeFactorsFor(c, w, kv.n_ctx)));
  LLM_ASSIGN_OR_RETURN(Rope rope, Rope::Create(c, freq_factors));
  LLM_ASSIGN_OR_RETURN(Rope rope_local,
                       Rope::Create(c, freq_factors, /*local=*/c.sliding_window > 0 && !c.swa_rope_global));

  // ---- weights
  const int64_t E = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff, V = c.n_vocab;
  LLM_RETURN_IF_ERROR(CheckMatrix(w.token_embd, V, E, "token_embd"));
  ModelWeights weights = w;
  if (weights.output.empty()) weights.output = weights.token_embd;  // tied embeddings
  LLM_RETURN_IF_ERROR(CheckMatrix(weights.output, V, E, "output"));
  // Layers another backend runs (partial offload): empty views, so nothing
  // packs, counts or reads them.
  for (int l = 0; l < first_layer; ++l) weights.layers[l] = LayerWeights{};
  for (int l = first_layer; l < c.n_layer; ++l) {
    const LayerWeights& L = w.layers[l];
    const std::string p = "blk." + std::to_string(l) + ".";
    LLM_RETURN_IF_ERROR(CheckMatrix(L.wq, Q, E, p + "attn_q"));
    LLM_RETURN_IF_ERROR(CheckMatrix(L.wk, KV, E, p + "attn_k"));
    LLM_RETURN_IF_ERROR(CheckMatrix(L.wv, KV, E, p + "attn_v"));
    LLM_RETURN_IF_ERROR(CheckMatrix(L.wo, E, Q, p + "attn_output"));
    if (c.n_expert > 0) {
      const int64_t NE = c.n_expert, FE = c.n_ff_exp;
      if (c.n_expert_used < 1 || c.n_expert_used > c.n_expert || FE <= 0 ||
          static_cast<int64_t>(L.exp_gate.size()) != NE || static_cast<int64_t>(L.exp_up.size()) != NE ||
          static_cast<int64_t>(L.exp_down.size()) != NE)
        return InvalidArgument("CPU backend: " + p + " expert counts disagree with the config");
      LLM_RETURN_IF_ERROR(CheckMatrix(L.router, NE, E, p + "ffn_gate_inp"));
      for (int64_t e = 0; e < NE; ++e) {
        LLM_RETURN_IF_ERROR(CheckMatrix(L.exp_gate[e], FE, E, p + "ffn_gate_exps"));
        LLM_RETURN_IF_ERROR(CheckMatrix(L.exp_up[e], FE, E, p + "ffn_up_exps"));
        LLM_RETURN_IF_ERROR(CheckMatrix(L.exp_down[e], E, FE, p + "ffn_down_exps"));
      }
      if (c.n_ff_shexp > 0) {
        LLM_RETURN_IF_ERROR(CheckMatrix(L.shexp_gate, c.n_ff_shexp, E, p + "ffn_gate_shexp"));
        LLM_RETURN_IF_ERROR(CheckMatrix(L.shexp_up, c.n_ff_shexp, E, p + "ffn_up_shexp"));
        LLM_RETURN_IF_ERROR(CheckMatrix(L.shexp_down, E, c.n_ff_shexp, p + "ffn_down_shexp"));
      }
      continue;
    }
    LLM_RETURN_IF_ERROR(CheckMatrix(L.w_gate, F, E, p + "ffn_gate"));
    LLM_RETURN_IF_ERROR(CheckMatrix(L.w_up, F, E, p + "ffn_up"));
    LLM_RETURN_IF_ERROR(CheckMatrix(L.w_down, E, F, p + "ffn_down"));
  }

  // ---- KV pool, reserved here and committed as blocks are first written
  // (CommitKvBlocks): a first write to a fresh page costs a fault and a page
  // clear (on a VM, also the host's backing of it), measured at ~9% of a
  // batched SmolLM2 run's time when it happened inside the decode loop, so
  // a step's new chunks are touched by the thread pool before its layers.
  // K and V each in their own type (kv_type_v 0: as kv_type)
  LLM_ASSIGN_OR_RETURN(const KvElem elem_k, KvElemOf(kv.kv_type));
  LLM_ASSIGN_OR_RETURN(const KvElem elem_v, KvElemOf(kv.kv_type_v != LLM_KV_AUTO ? kv.kv_type_v : kv.kv_type));
  if ((elem_k == KvElem::kQ4 || elem_v == KvElem::kQ4) && (c.head_dim % 32 != 0 || c.head_dim > 256))
    return Unsupported("CPU backend: a Q4_0 KV cache needs head_dim a multiple of 32 up to 256 (this model's is " +
                       std::to_string(c.head_dim) + ")");
  const KvLayout layout{c.n_layer - first_layer, c.n_head_kv, c.head_dim, kv.block_size, elem_k, elem_v, first_layer};
  const int64_t block_bytes = layout.block_bytes();
  if (block_bytes > std::numeric_limits<int64_t>::max() / 4 / kv.n_blocks)
    return OutOfMemory("CPU backend: KV pool size overflows");

  std::unique_ptr<CpuBackend> b;
  try {
    auto shared = std::make_shared<Shared>(c, weights, std::move(rope), std::move(rope_local));
    // Indexed by the model's layer; layers below first_layer stay empty.
    Norms* norms = &shared->norms;
    const size_t NL = static_cast<size_t>(c.n_layer);
    norms->attn.resize(NL);
    norms->ffn.resize(NL);
    if (c.n_ff_shexp > 0) norms->shexp_gate.resize(NL);
    if (c.qkv_bias) norms->bq.resize(NL), norms->bk.resize(NL), norms->bv.resize(NL);
    if (c.qk_norm) norms->q.resize(NL), norms->k.resize(NL);
    if (c.post_norms) norms->post_attn.resize(NL), norms->post_ffn.resize(NL);
    if (c.out_bias) norms->bo.resize(NL);
    if (c.attn_sinks) norms->sinks.resize(NL);
    if (c.expert_bias) {
      norms->router_b.resize(NL), norms->exp_gate_b.resize(NL);
      norms->exp_up_b.resize(NL), norms->exp_down_b.resize(NL);
    }
    for (int l = first_layer; l < c.n_layer; ++l) {
      const LayerWeights& L = w.layers[l];
      const std::string p = "blk." + std::to_string(l) + ".";
      LLM_ASSIGN_OR_RETURN(norms->attn[l], NormToF32(L.attn_norm, E, p + "attn_norm"));
      LLM_ASSIGN_OR_RETURN(norms->ffn[l], NormToF32(L.ffn_norm, E, p + "ffn_norm"));
      if (c.n_ff_shexp > 0) {
        LLM_ASSIGN_OR_RETURN(norms->shexp_gate[l], NormToF32(L.shexp_gate_inp, E, p + "ffn_gate_inp_shexp"));
      }
      if (c.qkv_bias) {
        LLM_ASSIGN_OR_RETURN(norms->bq[l], NormToF32(L.bq, Q, p + "attn_q.bias"));
        LLM_ASSIGN_OR_RETURN(norms->bk[l], NormToF32(L.bk, KV, p + "attn_k.bias"));
        LLM_ASSIGN_OR_RETURN(norms->bv[l], NormToF32(L.bv, KV, p + "attn_v.bias"));
      }
      if (c.qk_norm) {
        LLM_ASSIGN_OR_RETURN(norms->q[l], NormToF32(L.q_norm, c.head_dim, p + "attn_q_norm"));
        LLM_ASSIGN_OR_RETURN(norms->k[l], NormToF32(L.k_norm, c.head_dim, p + "attn_k_norm"));
      }
      if (c.out_bias) {
        LLM_ASSIGN_OR_RETURN(norms->bo[l], NormToF32(L.bo, E, p + "attn_output.bias"));
      }
      if (c.attn_sinks) {
        LLM_ASSIGN_OR_RETURN(norms->sinks[l], NormToF32(L.attn_sinks, c.n_head, p + "attn_sinks"));
      }
      if (c.expert_bias) {
        if (c.n_expert <= 0) return InvalidArgument("CPU backend: expert biases without experts");
        LLM_ASSIGN_OR_RETURN(norms->router_b[l], NormToF32(L.router_b, c.n_expert, p + "ffn_gate_inp.bias"));
        const int32_t NE = c.n_expert, FE = c.n_ff_exp;
        LLM_ASSIGN_OR_RETURN(norms->exp_gate_b[l], BiasesToF32(L.exp_gate_b, NE, FE, p + "ffn_gate_exps.bias"));
        LLM_ASSIGN_OR_RETURN(norms->exp_up_b[l], BiasesToF32(L.exp_up_b, NE, FE, p + "ffn_up_exps.bias"));
        LLM_ASSIGN_OR_RETURN(norms->exp_down_b[l], BiasesToF32(L.exp_down_b, NE, E, p + "ffn_down_exps.bias"));
      }
      if (c.post_norms) {
        LLM_ASSIGN_OR_RETURN(norms->post_attn[l], NormToF32(L.post_attn_norm, E, p + "post_attention_norm"));
        LLM_ASSIGN_OR_RETURN(norms->post_ffn[l], NormToF32(L.post_ffn_norm, E, p + "post_ffw_norm"));
      }
    }
    LLM_ASSIGN_OR_RETURN(norms->out, NormToF32(w.output_norm, E, "output_norm"));
    shared->kv = layout;
    shared->n_blocks = kv.n_blocks;
    shared->capacity = static_cast<int64_t>(kv.n_blocks) * kv.block_size;
    const int64_t pool_bytes = block_bytes * kv.n_blocks;
    shared->kv_pool = AllocZeroedArray<uint8_t>(static_cast<size_t>(pool_bytes));
    if (!shared->kv_pool) return OutOfMemory("CPU backend: cannot reserve the KV pool");
    shared->chunk_committed.assign(static_cast<size_t>((pool_bytes + kCommitChunk - 1) / kCommitChunk), 0);
    shared->weight_bytes = WeightBytes(shared->w, first_layer);
    if (ReadEnv().cpu_lanes_off) shared->lanes_off = true;
    if (ReadEnv().cpu_act_own) shared->act_own = true;
    b.reset(new CpuBackend(std::move(shared), n_threads));
    LLM_RETURN_IF_ERROR(b->PackWeights());
  } catch (const std::bad_alloc&) {
    return OutOfMemory("CPU backend: out of host memory");
  } catch (const std::system_error& e) {
    return InternalError(std::string("CPU backend: cannot start threads: ") + e.what());
  }

  b->shared_->weight_bytes += b->shared_->packed_bytes - b->shared_->released_bytes;
  return std::unique_ptr<Backend>(std::move(b));
}

namespace {
// Whether any matmul weight is F16 or BF16, whose inputs RoundDenseInput
// copies into ws_.xr (act_rounding.h).
bool AnyDenseHalfWeight(const ModelWeights& w) {
  auto half = [](const WeightView& v) { return v.type == TensorType::F16 || v.type == TensorType::BF16; };
  if (half(w.output)) return true;
  for (const LayerWeights& L : w.layers) {
    for (const WeightView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.shexp_gate,
                                &L.shexp_up, &L.shexp_down})
      if (half(*v)) return true;
    for (const std::vector<WeightView>* vs : {&L.exp_gate, &L.exp_up, &L.exp_down})
      for (const WeightView& v : *vs)
        if (half(v)) return true;
  }
  return false;
}
}  // namespace

Status CpuBackend::Reserve(int64_t n_tok, int64_t n_keys) {
  try {
    if (n_tok > ws_.cap_tok) {
      const int64_t E = cfg_.n_embd, Q = cfg_.q_dim(), KV = cfg_.kv_dim(), F = std::max({cfg_.n_ff, cfg_.n_ff_exp, cfg_.n_ff_shexp});
      ws_.x.resize(n_tok * E);
      ws_.xn.resize(n_tok * E);
      ws_.q.resize(n_tok * Q);
      ws_.k_new.resize(n_tok * KV);
      ws_.v_new.resize(n_tok * KV);
      ws_.att.resize(n_tok * Q);
      ws_.hb.resize(n_tok * F);
      ws_.hb2.resize(n_tok * F);
      ws_.cos_sin.resize(n_tok * cfg_.rope_dim);
      if (cfg_.sliding_window > 0) ws_.cos_sin_local.resize(n_tok * cfg_.rope_dim);
      ws_.x_out.resize(n_tok * E);
      ws_.att_out.resize(n_tok * Q);
      ws_.xq.resize(n_tok * (std::max({E, Q, F}) / 32));
      // Reserved here, so that a step never allocates it (RoundDenseInput
      // grows it only past what this reserved: never for these shapes).
      if (!shared_->act_own && AnyDenseHalfWeight(w_)) ws_.xr.resize(n_tok * std::max({E, Q, F}));
      if (cfg_.n_expert > 0) {
        const int64_t K = cfg_.n_expert_used;
        ws_.moe_logits.resize(n_tok * cfg_.n_expert);
        ws_.moe_pick.resize(n_tok * K);
        ws_.moe_x.resize(n_tok * E);
        ws_.moe_y.resize(n_tok * E);
      }
      ws_.pos.resize(n_tok);
      ws_.cap_tok = n_tok;
    }
    if (n_keys > ws_.cap_keys) {
      ws_.scores.resize(static_cast<size_t>(pool_.n_threads()) * (cfg_.n_head / cfg_.n_head_kv) * n_keys);
      ws_.cap_keys = n_keys;
    }
  } catch (const std::bad_alloc&) {
    return OutOfMemory("CPU backend: cannot grow activation buffers");
  }
  return Status::Ok();
}

Status CpuBackend::Check(const Batch& batch, const float* logits, int64_t* max_keys) {
  const BatchLimits limits{cfg_.n_vocab, capacity_, kv_.block_size, n_blocks_, cfg_.mrope()};
  LLM_ASSIGN_OR_RETURN(const BatchExtent e, CheckBatch(batch, logits != nullptr, limits, &ws_.seq_of));
  *max_keys = e.max_keys;
  return Status::Ok();
}

Status CpuBackend::Prepare(const Batch& batch, int64_t max_keys) {
  LLM_RETURN_IF_ERROR(Reserve(static_cast<int64_t>(batch.tokens.size()), max_keys));
  for (const BatchSeq& q : batch.seqs) {
    for (int32_t i = 0; i < q.n_tokens; ++i) ws_.pos[q.first + i] = static_cast<int64_t>(q.n_past) + i;
  }
  return Status::Ok();
}

Status CpuBackend::CopyKvBlock(int32_t src, int32_t dst) {
  if (src < 0 || src >= n_blocks_ || dst < 0 || dst >= n_blocks_)
    return InvalidArgument("CopyKvBlock: block id outside [0, " + std::to_string(n_blocks_) + ")");
  if (src == dst) return Status::Ok();
  CommitKvBlocks(std::span<const int32_t>(&dst, 1));
  const int64_t bb = kv_.block_bytes();
  std::memcpy(pool_base_ + dst * bb, pool_base_ + src * bb, static_cast<size_t>(bb));
  return Status::Ok();
}

void CpuBackend::CommitKvBlocks(std::span<const int32_t> blocks) {
  std::vector<uint8_t>& done = shared_->chunk_committed;
  const int64_t bb = kv_.block_bytes();
  new_chunks_.clear();
  for (const int32_t blk : blocks) {
    const int64_t c0 = blk * bb / kCommitChunk, c1 = ((blk + 1) * bb - 1) / kCommitChunk;
    for (int64_t c = c0; c <= c1; ++c) {
      if (done[c]) continue;
      done[c] = 1;
      new_chunks_.push_back(c);
    }
  }
  if (new_chunks_.empty()) return;
  const int64_t pool_bytes = bb * n_blocks_;
  for (const int64_t c : new_chunks_) shared_->committed_bytes += std::min(kCommitChunk, pool_bytes - c * kCommitChunk);
  auto touch = [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t lo = new_chunks_[i] * kCommitChunk;
      TouchPages(pool_base_, static_cast<size_t>(lo), static_cast<size_t>(std::min(pool_bytes, lo + kCommitChunk)));
    }
  };
  if (new_chunks_.size() > 1) {
    pool_.ParallelFor(static_cast<int64_t>(new_chunks_.size()), touch);
  } else {
    touch(0, 1, 0);
  }
}

void CpuBackend::CommitBatchBlocks(const Batch& batch) {
  const int64_t bs = kv_.block_size;
  for (const BatchSeq& q : batch.seqs) {
    const int64_t b0 = q.n_past / bs, b1 = (static_cast<int64_t>(q.n_past) + q.n_tokens - 1) / bs;
    CommitKvBlocks(q.block_table.subspan(static_cast<size_t>(b0), static_cast<size_t>(b1 - b0 + 1)));
  }
}

BackendMemory CpuBackend::memory() const {
  BackendMemory m;
  m.kv_committed = shared_->committed_bytes;
  m.kv_pool = kv_.block_bytes() * n_blocks_;
  m.weights = shared_->weight_bytes;
  auto ws_bytes = [](const Workspace& w) {
    int64_t n = 0;
    for (const std::vector<float>* v : {&w.x, &w.xn, &w.q, &w.k_new, &w.v_new, &w.att, &w.hb, &w.hb2, &w.cos_sin,
                                        &w.cos_sin_local, &w.x_out, &w.att_out, &w.scores, &w.moe_logits, &w.moe_x,
                                        &w.moe_y})
      n += static_cast<int64_t>(v->capacity() * sizeof(float));
    n += static_cast<int64_t>(w.xq.capacity() * sizeof(BlockQ8Act) + w.pos.capacity() * sizeof(int64_t) +
                              w.moe_pick.capacity() * sizeof(MoePick));
    return n;
  };
  m.scratch = ws_bytes(ws_) + static_cast<int64_t>(n_swap_slots_) * kv_.block_bytes();
  for (const auto& lane : lanes_) m.scratch += ws_bytes(lane->ws_);
  return m;
}

// On the CPU the "host" swap space is just more host memory: swapping costs a
// memcpy per block, and it is the reference the CUDA backend's copies follow.
Status CpuBackend::ReserveSwapSpace(int32_t n_slots) {
  if (n_slots < 0) return InvalidArgument("ReserveSwapSpace: negative slot count");
  swap_.reset();
  n_swap_slots_ = 0;
  if (n_slots == 0) return Status::Ok();
  const int64_t bb = kv_.block_bytes();
  if (bb > std::numeric_limits<int64_t>::max() / 4 / n_slots) return OutOfMemory("CPU backend: swap space size overflows");
  swap_ = AllocZeroedArray<uint8_t>(static_cast<size_t>(bb) * n_slots);
  if (!swap_) return OutOfMemory("CPU backend: cannot allocate a swap space of " + std::to_string(n_slots) + " blocks");
  n_swap_slots_ = n_slots;
  return Status::Ok();
}

Status CpuBackend::SwapOutKvBlocks(std::span<const KvSwap> moves) {
  LLM_RETURN_IF_ERROR(CheckKvSwaps(moves, n_blocks_, n_swap_slots_, "SwapOutKvBlocks"));
  const int64_t bb = kv_.block_bytes();
  for (const KvSwap& m : moves)
    std::memcpy(swap_.get() + m.slot * bb, pool_base_ + m.block * bb, static_cast<size_t>(bb));
  return Status::Ok();
}

Status CpuBackend::SwapInKvBlocks(std::span<const KvSwap> moves) {
  LLM_RETURN_IF_ERROR(CheckKvSwaps(moves, n_blocks_, n_swap_slots_, "SwapInKvBlocks"));
  const int64_t bb = kv_.block_bytes();
  for (const KvSwap& m : moves) {
    CommitKvBlocks(std::span<const int32_t>(&m.block, 1));
    std::memcpy(pool_base_ + m.block * bb, swap_.get() + m.slot * bb, static_cast<size_t>(bb));
  }
  return Status::Ok();
}

}  // namespace cpu
}  // namespace llm
