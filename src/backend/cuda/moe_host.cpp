#include "backend/cuda/moe_host.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "backend/cpu/kernels.h"  // DequantizeRow
#include "quant_matrix.cuh"       // QuantTypeSupported
#include "util/fp16.h"

namespace llm::cuda {

Status HostExpertLayer::Load(const LayerWeights& L, const ModelConfig& c, bool keep_quantized,
                             const std::string& name) {
  n_expert_ = c.n_expert;
  const std::vector<WeightView>* src[kNumParts] = {&L.exp_gate, &L.exp_up, &L.exp_down};
  static const char* const kNames[kNumParts] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
  for (int p = 0; p < kNumParts; ++p) {
    const std::vector<WeightView>& ex = *src[p];
    const std::string what = name + kNames[p] + " (host)";
    if (ex.empty() || static_cast<int32_t>(ex.size()) != n_expert_)
      return InvalidArgument("CUDA backend: " + what + ": expert count differs from the config");
    const WeightView& e0 = ex[0];
    for (const WeightView& e : ex)
      if (e.empty() || e.rows != e0.rows || e.cols != e0.cols || e.type != e0.type || e.rows <= 0)
        return InvalidArgument("CUDA backend: " + what + ": experts missing or of different shapes");
    if (e0.cols % 32 != 0 || e0.rows > std::numeric_limits<int32_t>::max())
      return Unsupported("CUDA backend: " + what + ": unsupported shape");
    const auto type = static_cast<uint32_t>(e0.type);
    const bool quant = keep_quantized && QuantTypeSupported(type) && TensorRowBytes(e0.type, e0.cols) != 0;
    const size_t rb = quant ? TensorRowBytes(e0.type, e0.cols) : static_cast<size_t>(e0.cols) * sizeof(uint16_t);
    const size_t per = rb * static_cast<size_t>(e0.rows);
    LLM_RETURN_IF_ERROR(host_[p].Allocate(per * ex.size(), what.c_str()));
    views_[p].clear();
    std::vector<float> row(static_cast<size_t>(e0.cols));
    for (size_t i = 0; i < ex.size(); ++i) {
      uint8_t* dst = host_[p].get<uint8_t>() + per * i;
      const WeightView& e = ex[i];
      for (int64_t r = 0; r < e.rows; ++r) {
        uint8_t* d = dst + rb * static_cast<size_t>(r);
        if (quant) {
          std::memcpy(d, static_cast<const uint8_t*>(e.data) + e.row_bytes * static_cast<size_t>(r), rb);
        } else {
          cpu::DequantizeRow(e, r, row.data());
          auto* h = reinterpret_cast<uint16_t*>(d);
          for (int64_t k = 0; k < e.cols; ++k) h[k] = F32ToBf16(row[k]);
        }
      }
      views_[p].push_back(WeightView{quant ? e0.type : TensorType::BF16, dst, e0.rows, e0.cols, rb});
    }
    ExpertStack& s = stack_[p];
    s.type = quant ? type : kExpertBf16;
    s.n_expert = n_expert_;
    s.rows = static_cast<int32_t>(e0.rows);
    s.cols = static_cast<int32_t>(e0.cols);
    s.row_bytes = static_cast<int64_t>(rb);
  }
  const size_t tb = kNumParts * table_bytes();
  LLM_RETURN_IF_ERROR(tables_pinned_.Allocate(tb, (name + "expert tables (host)").c_str()));
  LLM_RETURN_IF_ERROR(tables_dev_.Allocate(tb, (name + "expert tables").c_str()));
  std::memset(tables_pinned_.get(), 0, tb);
  for (int p = 0; p < kNumParts; ++p) stack_[p].experts = static_cast<const uint8_t* const*>(table_dev(p));
  return Status::Ok();
}

Status ExpertCache::Init(int32_t n_slots, size_t slot_bytes, int32_t n_layer, int32_t n_expert) {
  if (n_slots <= 0 || slot_bytes == 0) return InvalidArgument("CUDA backend: an expert cache of no slots");
  slot_bytes_ = slot_bytes;
  n_expert_ = n_expert;
  LLM_RETURN_IF_ERROR(buf_.Allocate(slot_bytes * static_cast<size_t>(n_slots), "device expert cache"));
  key_slot_.assign(static_cast<size_t>(n_layer) * n_expert, -1);
  slot_key_.assign(static_cast<size_t>(n_slots), -1);
  slot_used_.assign(static_cast<size_t>(n_slots), 0);
  return Status::Ok();
}

int32_t ExpertCache::Find(int32_t layer, int32_t e) {
  const int32_t s = key_slot_[static_cast<size_t>(layer) * n_expert_ + e];
  if (s >= 0) slot_used_[s] = ++tick_;
  return s;
}

int32_t ExpertCache::Insert(int32_t layer, int32_t e, const std::vector<int32_t>& keep_slots) {
  int32_t victim = -1;
  for (int32_t s = 0; s < slots(); ++s) {
    if (std::find(keep_slots.begin(), keep_slots.end(), s) != keep_slots.end()) continue;
    if (victim < 0 || slot_key_[s] < 0 || (slot_key_[victim] >= 0 && slot_used_[s] < slot_used_[victim])) {
      victim = s;
      if (slot_key_[s] < 0) break;  // a free slot
    }
  }
  if (victim < 0) return -1;
  if (slot_key_[victim] >= 0) {
    key_slot_[slot_key_[victim]] = -1;
    ++evictions_;
  }
  const int32_t key = layer * n_expert_ + e;
  slot_key_[victim] = key;
  key_slot_[key] = victim;
  slot_used_[victim] = ++tick_;
  return victim;
}

MoeHostWay HostMoeCost::Choose(int32_t forced, bool copy_fits, int64_t miss_bytes, int64_t n_picks) {
  if (!copy_fits || forced == 1) return MoeHostWay::kCpu;
  if (forced == 2) return MoeHostWay::kCopy;
  ++choices_;
  if (bw_ <= 0) return MoeHostWay::kCopy;  // never measured: try it
  if (pick_s_ <= 0) return MoeHostWay::kCpu;
  const double est_copy = static_cast<double>(miss_bytes) / bw_;
  const double est_cpu = pick_s_ * static_cast<double>(n_picks);
  const MoeHostWay best = est_copy <= est_cpu ? MoeHostWay::kCopy : MoeHostWay::kCpu;
  if (choices_ % kExploreEvery == 0) return best == MoeHostWay::kCopy ? MoeHostWay::kCpu : MoeHostWay::kCopy;
  return best;
}

void HostMoeCost::NoteCopy(int64_t bytes, double seconds) {
  if (bytes <= 0 || seconds <= 0) return;
  const double bw = static_cast<double>(bytes) / seconds;
  bw_ = bw_ <= 0 ? bw : 0.8 * bw_ + 0.2 * bw;
}

void HostMoeCost::NoteCpu(int64_t n_picks, double seconds) {
  if (n_picks <= 0 || seconds <= 0) return;
  const double s = seconds / static_cast<double>(n_picks);
  pick_s_ = pick_s_ <= 0 ? s : 0.8 * pick_s_ + 0.2 * s;
}

}  // namespace llm::cuda
