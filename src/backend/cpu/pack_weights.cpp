// CpuBackend::PackWeights: row-interleaved copies (quant_pack.h) of the
// block-quantized matmul weights, made once at creation.
//
// Every matmul weight of a packable type (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
// Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4) gets a copy in memory the backend owns;
// its WeightView in w_ points to it through `packed`, and both kernel tables
// read it (the SIMD one the packed bytes, the portable one the original rows
// in the same order). The copy is as large as the original (Q4_0: 144 bytes
// per 8 blocks of 18; Q4_1 160 per 8 of 20; Q5_0 176 per 8 of 22; Q5_1 192
// per 8 of 24; Q8_0 272 per 8 of 34; Q6_K 1680 per 8 super-blocks of 210, its
// 4-bit and 2-bit quant planes kept apart as in the file; IQ4_NL 144 per 8
// of 18; MXFP4 136 per 8 of 17), but for the types with 6-bit scales, Q4_K,
// Q5_K and IQ4_XS, which keep them as bytes beside the super-block's d (and
// dmin) per 8 rows: 4.625 bits per weight against 4.5, 5.625 against 5.5,
// and 4.3125 against 4.25 (+1.5%). Decode streams every packed byte, so a wider
// layout costs decode speed in proportion (the earlier Q4_K layout with F32
// products per block, 6 bits, ran at 0.75x llama.cpp; the earlier 5-bit
// one with byte quants, 10 bits, at 0.7x of the lean one).
// The mapped file pages of the original are then no longer read by the
// matmuls (the token embedding gather still reads token_embd), so when the
// weights are a file mapping each matrix's pages are dropped from the
// resident set as soon as it is packed (MmapFile::ReleasePages): resident
// memory then holds the packed copy alone, and the peak one matrix more
// (the 1B-shape Q4_0 file at a 4096-token context: see
// bench/results/2026-11-24-cpu-peer.md). Pages read again (the embedding
// rows a prompt gathers, the portable kernels) fault back in from the file;
// LLM_CPU_RELEASE=0 keeps them all resident. The row
// groups are packed by the backend's thread pool. LLM_CPU_PACK=0 turns
// packing off (for measurements).
//
// All copies live in one region from AllocZeroedLarge, which asks for
// transparent huge pages: a decode step streams every packed byte, and
// with 4 KiB pages (what aligned_alloc gave: 14 MB of the 3B-shape
// Q4_K_M file's 2 GB were huge) each page of the stream is a TLB miss and
// a page walk. One region rather than one mapping per matrix, so the small
// matrices (a 3B layer's K and V projections: 1.7 MB each) share huge pages
// too.
#include <atomic>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/quant_pack.h"
#include "util/env.h"
#include "util/mmap_file.h"

namespace llm::cpu {

Status CpuBackend::PackWeights() {
  if (ReadEnv().cpu_pack_off) return Status::Ok();
  const bool release = w_.file_mapped && !ReadEnv().cpu_release_off;
  // The matrices to pack, in the order the steps read them, and their
  // offsets in the region (64-byte aligned).
  std::vector<WeightView*> todo;
  for (LayerWeights& L : w_.layers) {
    for (WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.shexp_gate, &L.shexp_up,
                          &L.shexp_down})
      if (CanPackR8(*w)) todo.push_back(w);
    for (std::vector<WeightView>* ws : {&L.exp_gate, &L.exp_up, &L.exp_down})
      for (WeightView& w : *ws)
        if (CanPackR8(w)) todo.push_back(&w);
  }
  if (CanPackR8(w_.output)) todo.push_back(&w_.output);
  if (todo.empty()) return Status::Ok();
  std::vector<size_t> offset(todo.size());
  size_t total = 0;
  for (size_t i = 0; i < todo.size(); ++i) {
    offset[i] = total;
    total += (PackedR8Bytes(*todo[i]) + 63) / 64 * 64;
  }
  LargeArray<uint8_t> region = AllocZeroedArray<uint8_t>(total);
  if (!region) return OutOfMemory("CPU backend: cannot allocate packed weights");
  for (size_t i = 0; i < todo.size(); ++i) {
    WeightView* w = todo[i];
    uint8_t* buf = region.get() + offset[i];
    std::atomic<bool> ok{true};
    pool_.ParallelFor((w->rows + kPackRows - 1) / kPackRows, [&](int64_t g0, int64_t g1, int) {
      if (!PackR8Groups(*w, buf, g0, g1)) ok.store(false, std::memory_order_relaxed);
    });
    if (!ok.load()) continue;  // a block the layout cannot hold (none now): keep the rows
    w->packed = buf;
    shared_->packed_bytes += static_cast<int64_t>(PackedR8Bytes(*w));
    if (release) {
      // The file's pages of this matrix are no longer read: llm_stats'
      // weight bytes count the packed copy in their place.
      MmapFile::ReleasePages(w->data, static_cast<size_t>(w->rows) * w->row_bytes);
      shared_->released_bytes += static_cast<int64_t>(w->rows) * w->row_bytes;
    }
  }
  shared_->packed = std::move(region);
  return Status::Ok();
}

}  // namespace llm::cpu
