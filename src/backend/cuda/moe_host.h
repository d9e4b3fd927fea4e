// Experts kept in host memory (CudaBackendOptions::n_cpu_moe) and the
// device expert cache that serves them.
//
//   HostExpertLayer  one MoE layer's experts (gate, up, down) in page-locked
//                    host memory, in the bytes the device kernels read (the
//                    file's blocks when moe_matmul decodes them, else BF16),
//                    plus the layer's device pointer tables: the kernels'
//                    ExpertStack of a host layer points into cache slots.
//   ExpertCache      a fixed number of device slots, each one expert's
//                    gate + up + down, shared by every host layer; keyed by
//                    (layer, expert), least recently used evicted. A step
//                    that needs more distinct experts in one layer than
//                    there are slots cannot copy (the CPU computes it).
//   HostMoeCost      the per-step choice between the two ways of running a
//                    host layer, from measured costs (below).
//
// Per step and host layer, after the router ran on the device (cuda_moe.cpp):
//
//   copy: the chosen experts not in the cache are copied host -> device
//         slots, the tables rewritten, and the device kernels run as for a
//         device layer (outputs identical to experts kept on the device).
//   cpu:  the residual rows and the picks go to the host, the CPU kernels
//         (backend/cpu/kernels.h) run the chosen experts, the weighted sum
//         goes back up and the device combine adds it (and the shared expert).
//
// The choice: est_copy = missing bytes / measured host->device bandwidth,
// est_cpu = picks x measured CPU seconds per pick; the cheaper, each measure
// an exponential average of the steps that took that way. A way never
// measured is tried first, and every kExploreEvery-th choice takes the
// other way so a stale estimate is refreshed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/cuda_util.h"
#include "model/config.h"
#include "model/weights.h"
#include "moe_matmul.cuh"

namespace llm::cuda {

// Projections of an expert, in slot order.
enum ExpertPart : int { kPartGate = 0, kPartUp = 1, kPartDown = 2, kNumParts = 3 };

class HostExpertLayer {
 public:
  // Copies L's experts to page-locked memory (BF16 when the device kernels
  // cannot read their type) and allocates the device tables. `name` names
  // the layer in errors.
  Status Load(const LayerWeights& L, const ModelConfig& c, bool keep_quantized, const std::string& name);

  // Expert e's projection p as the CPU kernels read it.
  const WeightView& view(int p, int e) const { return views_[p][e]; }
  const uint8_t* bytes_of(int p, int e) const { return host_[p].get<uint8_t>() + part_bytes(p) * e; }
  size_t part_bytes(int p) const { return static_cast<size_t>(stack_[p].rows) * stack_[p].row_bytes; }
  size_t expert_bytes() const { return part_bytes(0) + part_bytes(1) + part_bytes(2); }
  size_t host_bytes() const { return host_[0].bytes() + host_[1].bytes() + host_[2].bytes(); }
  // The kernels' view: each table row points at a slot (cuda_moe_host.cpp
  // rewrites the tables before each copy-way step).
  const ExpertStack& stack(int p) const { return stack_[p]; }
  // (n_expert) per part, page-locked staging of the next table upload.
  const uint8_t** table_host(int p) const { return tables_pinned_.get<const uint8_t*>() + p * n_expert_; }
  void* table_dev(int p) const { return tables_dev_.get<const uint8_t*>() + p * n_expert_; }
  size_t table_bytes() const { return static_cast<size_t>(n_expert_) * sizeof(const uint8_t*); }

 private:
  int32_t n_expert_ = 0;
  PinnedBuffer host_[kNumParts];
  std::vector<WeightView> views_[kNumParts];
  ExpertStack stack_[kNumParts];
  PinnedBuffer tables_pinned_;  // (3, n_expert) device addresses
  DeviceBuffer tables_dev_;     // (3, n_expert)
};

class ExpertCache {
 public:
  // n_slots slots of slot_bytes on the device, for keys layer * n_expert + e.
  Status Init(int32_t n_slots, size_t slot_bytes, int32_t n_layer, int32_t n_expert);
  int32_t slots() const { return static_cast<int32_t>(slot_key_.size()); }
  size_t device_bytes() const { return buf_.bytes(); }
  uint8_t* slot(int32_t s) const { return buf_.get<uint8_t>() + slot_bytes_ * static_cast<size_t>(s); }

  bool Holds(int32_t layer, int32_t e) const { return key_slot_[static_cast<size_t>(layer) * n_expert_ + e] >= 0; }
  // The slot of (layer, e), or -1; a hit refreshes its use.
  int32_t Find(int32_t layer, int32_t e);
  // A slot for (layer, e), evicting the least recently used whose key is
  // not in `keep` (the step's experts of this layer, already placed); -1
  // when every slot is kept. The caller fills it.
  int32_t Insert(int32_t layer, int32_t e, const std::vector<int32_t>& keep_slots);
  int64_t evictions() const { return evictions_; }

 private:
  DeviceBuffer buf_;
  size_t slot_bytes_ = 0;
  int32_t n_expert_ = 0;
  std::vector<int32_t> key_slot_;   // (n_layer * n_expert) -> slot or -1
  std::vector<int32_t> slot_key_;   // (n_slots) -> key or -1
  std::vector<uint64_t> slot_used_; // (n_slots) last use tick
  uint64_t tick_ = 0;
  int64_t evictions_ = 0;
};

// The per-step choice (HostMoeCost::Choose) and its measurements.
enum class MoeHostWay { kCopy, kCpu };

class HostMoeCost {
 public:
  static constexpr int kExploreEvery = 32;
  // forced: 0 auto, 1 cpu always, 2 copy whenever the cache can hold the
  // step's experts (llm.h LLM_MOE_HOST_*).
  MoeHostWay Choose(int32_t forced, bool copy_fits, int64_t miss_bytes, int64_t n_picks);
  void NoteCopy(int64_t bytes, double seconds);
  void NoteCpu(int64_t n_picks, double seconds);
  double bytes_per_second() const { return bw_; }
  double seconds_per_pick() const { return pick_s_; }

 private:
  double bw_ = 0, pick_s_ = 0;  // 0: not measured yet
  int64_t choices_ = 0;
};

}  // namespace llm::cuda
