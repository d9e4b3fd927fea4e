#include "backend/cpu/cpu_backend.h"

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
                                                    const KvCacheSpec& kv, int n_threads) {
  return cpu::CpuBackend::Create(config, weights, kv, n_threads);
}

int64_t CpuKvBlockBytes(const ModelConfig& c, int32_t block_size) {
  return cpu::KvLayout{c.n_layer, c.n_head_kv, c.head_dim, block_size}.block_floats() * static_cast<int64_t>(sizeof(float));
}

namespace cpu {
namespace {

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

}  // namespace

CpuBackend::CpuBackend(std::shared_ptr<Shared> shared, int n_threads)
    : shared_(std::move(shared)),
      cfg_(shared_->cfg),
      w_(shared_->w),
      k_(shared_->k),
      rope_(shared_->rope),
      rope_local_(shared_->rope_local),
      norms_(shared_->norms),
      kv_(shared_->kv),
      n_blocks_(shared_->n_blocks),
      capacity_(shared_->capacity),
      pool_base_(shared_->kv_pool.get()),
      pool_(n_threads) {}

StatusOr<std::unique_ptr<Backend>> CpuBackend::Create(const ModelConfig& c, const ModelWeights& w,
                                                      const KvCacheSpec& kv, int n_threads) {
  // ---- configuration
  if (c.n_vocab <= 0 || c.n_embd <= 0 || c.n_layer <= 0 || c.n_head <= 0 || c.n_head_kv <= 0 || c.head_dim <= 0 ||
      c.n_ff <= 0)
    return InvalidArgument("CPU backend: model dimensions must be positive");
  if (c.n_head % c.n_head_kv != 0) return InvalidArgument("CPU backend: n_head must be a multiple of n_head_kv");
  if (c.head_dim > 256) return Unsupported("CPU backend: head_dim above 256");
  if (!(c.rms_eps >= 0.0f)) return InvalidArgument("CPU backend: negative rms_eps");
  if (kv.block_size <= 0 || kv.n_blocks <= 0) return InvalidArgument("CPU backend: KV block_size and n_blocks must be positive");
  if (static_cast<int64_t>(w.layers.size()) != c.n_layer) return InvalidArgument("CPU backend: weights have the wrong layer count");
  if (c.sliding_window < 0 || c.swa_pattern < 0) return InvalidArgument("CPU backend: negative sliding window");
  if (!(c.embd_scale > 0.0f) || !(c.final_logit_softcap >= 0.0f) || !(c.attn_logit_softcap >= 0.0f) ||
      c.attn_scale < 0.0f)
    return InvalidArgument("CPU backend: invalid embedding scale, attention scale or logit soft-cap");
  // rope_freqs (Llama 3.1+) or LongRoPE's long or short factors (Phi-3.5)
  // divide every layer's frequencies, as in llama.cpp.
  LLM_ASSIGN_OR_RETURN(std::vector<float> freq_factors, RopeFreqFactors(c, RopeFactorsFor(c, w, kv.n_ctx)));
  LLM_ASSIGN_OR_RETURN(Rope rope, Rope::Create(c, freq_factors));
  LLM_ASSIGN_OR_RETURN(Rope rope_local, Rope::Create(c, freq_factors, /*local=*/c.sliding_window > 0));

  // ---- weights
  const int64_t E = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff, V = c.n_vocab;
  LLM_RETURN_IF_ERROR(CheckMatrix(w.token_embd, V, E, "token_embd"));
  ModelWeights weights = w;
  if (weights.output.empty()) weights.output = weights.token_embd;  // tied embeddings
  LLM_RETURN_IF_ERROR(CheckMatrix(weights.output, V, E, "output"));
  for (int l = 0; l < c.n_layer; ++l) {
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

  // ---- KV pool, committed below (backend.h): a first write to a fresh page
  // costs a fault and a page clear (on a VM, also the host's backing of
  // it), measured at ~9% of a batched SmolLM2 run's time when it happened in
  // the decode loop.
  const KvLayout layout{c.n_layer, c.n_head_kv, c.head_dim, kv.block_size};
  const int64_t block_floats = layout.block_floats();
  if (block_floats > std::numeric_limits<int64_t>::max() / 4 / kv.n_blocks)
    return OutOfMemory("CPU backend: KV pool size overflows");

  std::unique_ptr<CpuBackend> b;
  try {
    auto shared = std::make_shared<Shared>(c, weights, std::move(rope), std::move(rope_local));
    Norms* norms = &shared->norms;
    for (int l = 0; l < c.n_layer; ++l) {
      const LayerWeights& L = w.layers[l];
      const std::string p = "blk." + std::to_string(l) + ".";
      LLM_ASSIGN_OR_RETURN(auto an, NormToF32(L.attn_norm, E, p + "attn_norm"));
      LLM_ASSIGN_OR_RETURN(auto fn, NormToF32(L.ffn_norm, E, p + "ffn_norm"));
      norms->attn.push_back(std::move(an));
      norms->ffn.push_back(std::move(fn));
      if (c.n_ff_shexp > 0) {
        LLM_ASSIGN_OR_RETURN(auto g, NormToF32(L.shexp_gate_inp, E, p + "ffn_gate_inp_shexp"));
        norms->shexp_gate.push_back(std::move(g));
      }
      if (c.qkv_bias) {
        LLM_ASSIGN_OR_RETURN(auto bq, NormToF32(L.bq, Q, p + "attn_q.bias"));
        LLM_ASSIGN_OR_RETURN(auto bk, NormToF32(L.bk, KV, p + "attn_k.bias"));
        LLM_ASSIGN_OR_RETURN(auto bv, NormToF32(L.bv, KV, p + "attn_v.bias"));
        norms->bq.push_back(std::move(bq));
        norms->bk.push_back(std::move(bk));
        norms->bv.push_back(std::move(bv));
      }
      if (c.qk_norm) {
        LLM_ASSIGN_OR_RETURN(auto qn, NormToF32(L.q_norm, c.head_dim, p + "attn_q_norm"));
        LLM_ASSIGN_OR_RETURN(auto kn, NormToF32(L.k_norm, c.head_dim, p + "attn_k_norm"));
        norms->q.push_back(std::move(qn));
        norms->k.push_back(std::move(kn));
      }
      if (c.post_norms) {
        LLM_ASSIGN_OR_RETURN(auto pa, NormToF32(L.post_attn_norm, E, p + "post_attention_norm"));
        LLM_ASSIGN_OR_RETURN(auto pf, NormToF32(L.post_ffn_norm, E, p + "post_ffw_norm"));
        norms->post_attn.push_back(std::move(pa));
        norms->post_ffn.push_back(std::move(pf));
      }
    }
    LLM_ASSIGN_OR_RETURN(norms->out, NormToF32(w.output_norm, E, "output_norm"));
    shared->kv = layout;
    shared->n_blocks = kv.n_blocks;
    shared->capacity = static_cast<int64_t>(kv.n_blocks) * kv.block_size;
    shared->kv_pool = AllocZeroedArray<float>(static_cast<size_t>(block_floats) * kv.n_blocks);
    if (!shared->kv_pool) return OutOfMemory("CPU backend: cannot allocate the KV pool");
    if (ReadEnv().cpu_lanes_off) shared->lanes_off = true;
    b.reset(new CpuBackend(std::move(shared), n_threads));
    LLM_RETURN_IF_ERROR(b->PackWeights());
  } catch (const std::bad_alloc&) {
    return OutOfMemory("CPU backend: out of host memory");
  } catch (const std::system_error& e) {
    return InternalError(std::string("CPU backend: cannot start threads: ") + e.what());
  }

  // ---- commit the KV pool: every page touched by the backend's threads
  const size_t pool_bytes = static_cast<size_t>(block_floats) * kv.n_blocks * sizeof(float);
  constexpr size_t kChunk = size_t{1} << 21;  // per task: one huge page
  b->pool_.ParallelFor(static_cast<int64_t>((pool_bytes + kChunk - 1) / kChunk), [&](int64_t c0, int64_t c1, int) {
    const size_t lo = static_cast<size_t>(c0) * kChunk, hi = std::min(pool_bytes, static_cast<size_t>(c1) * kChunk);
    TouchPages(b->pool_base_, lo, hi);
  });
  return std::unique_ptr<Backend>(std::move(b));
}

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
  const BatchLimits limits{cfg_.n_vocab, capacity_, kv_.block_size, n_blocks_};
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
  const int64_t bf = kv_.block_floats();
  std::memcpy(pool_base_ + dst * bf, pool_base_ + src * bf, static_cast<size_t>(bf) * sizeof(float));
  return Status::Ok();
}

// On the CPU the "host" swap space is just more host memory: swapping costs a
// memcpy per block, and it is the reference the CUDA backend's copies follow.
Status CpuBackend::ReserveSwapSpace(int32_t n_slots) {
  if (n_slots < 0) return InvalidArgument("ReserveSwapSpace: negative slot count");
  swap_.reset();
  n_swap_slots_ = 0;
  if (n_slots == 0) return Status::Ok();
  const int64_t bf = kv_.block_floats();
  if (bf > std::numeric_limits<int64_t>::max() / 4 / n_slots) return OutOfMemory("CPU backend: swap space size overflows");
  swap_ = AllocZeroedArray<float>(static_cast<size_t>(bf) * n_slots);
  if (!swap_) return OutOfMemory("CPU backend: cannot allocate a swap space of " + std::to_string(n_slots) + " blocks");
  n_swap_slots_ = n_slots;
  return Status::Ok();
}

Status CpuBackend::SwapOutKvBlocks(std::span<const KvSwap> moves) {
  LLM_RETURN_IF_ERROR(CheckKvSwaps(moves, n_blocks_, n_swap_slots_, "SwapOutKvBlocks"));
  const int64_t bf = kv_.block_floats();
  for (const KvSwap& m : moves)
    std::memcpy(swap_.get() + m.slot * bf, pool_base_ + m.block * bf, static_cast<size_t>(bf) * sizeof(float));
  return Status::Ok();
}

Status CpuBackend::SwapInKvBlocks(std::span<const KvSwap> moves) {
  LLM_RETURN_IF_ERROR(CheckKvSwaps(moves, n_blocks_, n_swap_slots_, "SwapInKvBlocks"));
  const int64_t bf = kv_.block_floats();
  for (const KvSwap& m : moves)
    std::memcpy(pool_base_ + m.block * bf, swap_.get() + m.slot * bf, static_cast<size_t>(bf) * sizeof(float));
  return Status::Ok();
}

}  // namespace cpu
}  // namespace llm
