#include "backend/cuda/cuda_weights.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "backend/cpu/kernels.h"  // DequantizeRow: the reference dequantization
#include "util/fp16.h"

namespace llm::cuda {
namespace {

// Rows of `parts` stacked, converted to BF16 on the host (block-quantized
// types through the CPU backend's dequantization), uploaded in chunks.
Status UploadBf16(std::span<const WeightView* const> parts, int64_t rows, int64_t cols, DeviceBuffer* out,
                  const std::string& name) {
  LLM_RETURN_IF_ERROR(out->Allocate(static_cast<size_t>(rows * cols) * sizeof(uint16_t), name.c_str()));
  const int64_t chunk_rows = std::max<int64_t>(1, (int64_t{16} << 20) / cols);  // ~32 MB of bf16
  std::vector<uint16_t> host;
  const unsigned n_threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  int64_t dst_row = 0;
  for (const WeightView* p : parts) {
    for (int64_t r0 = 0; r0 < p->rows; r0 += chunk_rows) {
      const int64_t nr = std::min(chunk_rows, p->rows - r0);
      try {
        host.resize(static_cast<size_t>(nr * cols));
        auto convert = [&](int64_t a, int64_t b) {
          std::vector<float> row(static_cast<size_t>(cols));
          for (int64_t r = a; r < b; ++r) {
            cpu::DequantizeRow(*p, r0 + r, row.data());
            uint16_t* dst = host.data() + r * cols;
            for (int64_t c = 0; c < cols; ++c) dst[c] = F32ToBf16(row[c]);
          }
        };
        const int64_t per = (nr + n_threads - 1) / n_threads;
        std::vector<std::thread> pool;
        for (unsigned t = 1; t < n_threads && t * per < nr; ++t)
          pool.emplace_back(convert, t * per, std::min<int64_t>(nr, (t + 1) * per));
        convert(0, std::min<int64_t>(nr, per));
        for (auto& th : pool) th.join();
      } catch (const std::exception& e) {
        return OutOfMemory("CUDA backend: converting " + name + " on the host: " + e.what());
      }
      LLM_CUDA_TRY(cudaMemcpy(out->get<uint16_t>() + dst_row * cols, host.data(), host.size() * sizeof(uint16_t),
                              cudaMemcpyHostToDevice),
                   ("upload " + name).c_str());
      dst_row += nr;
    }
  }
  return Status::Ok();
}

// Whether Upload keeps `parts` in their file's blocks (every part a type the
// kernels decode, at most kMaxQuantParts of them), else converts to BF16.
bool KeepsBlocks(std::initializer_list<const WeightView*> parts, int64_t cols, bool keep_quantized) {
  bool all_quant = keep_quantized && parts.size() <= static_cast<size_t>(kMaxQuantParts);
  for (const WeightView* p : parts)
    all_quant = all_quant && QuantTypeSupported(static_cast<uint32_t>(p->type)) && TensorRowBytes(p->type, cols) != 0;
  return all_quant;
}

// An expert's row as stored on the device and in host memory.
size_t ExpertRowBytes(const WeightView& e0, bool keep_quantized) {
  const bool quant = keep_quantized && QuantTypeSupported(static_cast<uint32_t>(e0.type)) &&
                     TensorRowBytes(e0.type, e0.cols) != 0;
  return quant ? TensorRowBytes(e0.type, e0.cols) : static_cast<size_t>(e0.cols) * sizeof(uint16_t);
}

}  // namespace

size_t DeviceMatrix::StoredBytes(std::initializer_list<const WeightView*> parts, bool keep_quantized) {
  if (parts.size() == 0) return 0;
  const int64_t cols = (*parts.begin())->cols;
  int64_t rows = 0;
  for (const WeightView* p : parts) {
    if (p->empty() || p->cols != cols || p->rows <= 0) return 0;
    rows += p->rows;
  }
  if (!KeepsBlocks(parts, cols, keep_quantized)) return static_cast<size_t>(rows * cols) * sizeof(uint16_t);
  size_t total = 0;
  for (const WeightView* p : parts) total += static_cast<size_t>(p->rows) * TensorRowBytes(p->type, cols);
  return total;
}

bool DeviceMatrix::StaysQuantized(std::initializer_list<const WeightView*> parts, bool keep_quantized) {
  return parts.size() > 0 && KeepsBlocks(parts, (*parts.begin())->cols, keep_quantized);
}

size_t DeviceExperts::ExpertBytes(std::span<const WeightView> experts, bool keep_quantized) {
  if (experts.empty()) return 0;
  return ExpertRowBytes(experts[0], keep_quantized) * static_cast<size_t>(std::max<int64_t>(experts[0].rows, 0));
}

Status DeviceMatrix::Upload(std::initializer_list<const WeightView*> parts, const std::string& name,
                            bool keep_quantized) {
  buf_.Reset();
  q_ = QuantMatrix{};
  rows_ = cols_ = 0;
  if (parts.size() == 0) return InvalidArgument("CUDA backend: " + name + " has no parts");
  const int64_t cols = (*parts.begin())->cols;
  int64_t rows = 0;
  for (const WeightView* p : parts) {
    if (p->empty() || p->cols != cols || p->rows <= 0)
      return InvalidArgument("CUDA backend: " + name + ": parts missing or of different widths");
    rows += p->rows;
  }
  const bool all_quant = KeepsBlocks(parts, cols, keep_quantized);
  if (rows > std::numeric_limits<int32_t>::max() || cols > std::numeric_limits<int32_t>::max())
    return Unsupported("CUDA backend: " + name + " has more than 2^31 rows or columns");
  rows_ = rows;
  cols_ = cols;
  if (!all_quant) {
    const std::vector<const WeightView*> list(parts);
    return UploadBf16(list, rows, cols, &buf_, name);
  }

  // The file's bytes, part after part.
  size_t total = 0;
  for (const WeightView* p : parts) total += static_cast<size_t>(p->rows) * TensorRowBytes(p->type, cols);
  LLM_RETURN_IF_ERROR(buf_.Allocate(total, name.c_str()));
  auto* dst = buf_.get<uint8_t>();
  size_t off = 0;
  for (const WeightView* p : parts) {
    const size_t rb = TensorRowBytes(p->type, cols);
    const auto* src = static_cast<const uint8_t*>(p->data);
    if (p->row_bytes == rb) {
      LLM_CUDA_TRY(cudaMemcpy(dst + off, src, rb * static_cast<size_t>(p->rows), cudaMemcpyHostToDevice),
                   ("upload " + name).c_str());
    } else {  // rows not back to back in the source
      for (int64_t r = 0; r < p->rows; ++r)
        LLM_CUDA_TRY(cudaMemcpy(dst + off + rb * static_cast<size_t>(r), src + p->row_bytes * static_cast<size_t>(r),
                                rb, cudaMemcpyHostToDevice),
                     ("upload " + name).c_str());
    }
    QuantPart& q = q_.part[q_.n_parts++];
    q.data = dst + off;
    q.type = static_cast<uint32_t>(p->type);
    q.rows = static_cast<int32_t>(p->rows);
    q.row_bytes = static_cast<int64_t>(rb);
    off += rb * static_cast<size_t>(p->rows);
  }
  q_.rows = static_cast<int32_t>(rows);
  q_.cols = static_cast<int32_t>(cols);
  if (CheckQuantMatrix(q_) != cudaSuccess) return InternalError("CUDA backend: " + name + ": malformed quantized matrix");
  return Status::Ok();
}

Status DeviceExperts::Upload(std::span<const WeightView> experts, const std::string& name, bool keep_quantized) {
  buf_.Reset();
  table_.Reset();
  s_ = ExpertStack{};
  if (experts.empty()) return InvalidArgument("CUDA backend: " + name + " has no experts");
  const WeightView& e0 = experts[0];
  for (const WeightView& e : experts)
    if (e.empty() || e.rows != e0.rows || e.cols != e0.cols || e.type != e0.type || e.rows <= 0)
      return InvalidArgument("CUDA backend: " + name + ": experts missing or of different shapes");
  if (e0.rows > std::numeric_limits<int32_t>::max() || e0.cols > std::numeric_limits<int32_t>::max() ||
      experts.size() > static_cast<size_t>(kMoeMaxExperts))
    return Unsupported("CUDA backend: " + name + " is too large");
  if (e0.cols % 32 != 0) return Unsupported("CUDA backend: " + name + ": rows of a width not a multiple of 32");
  const auto type = static_cast<uint32_t>(e0.type);
  const bool quant = keep_quantized && QuantTypeSupported(type) && TensorRowBytes(e0.type, e0.cols) != 0;
  const size_t rb = ExpertRowBytes(e0, keep_quantized);
  const size_t per = rb * static_cast<size_t>(e0.rows);
  if (quant) {
    LLM_RETURN_IF_ERROR(buf_.Allocate(per * experts.size(), name.c_str()));
    auto* dst = buf_.get<uint8_t>();
    for (size_t i = 0; i < experts.size(); ++i) {
      const WeightView& e = experts[i];
      const auto* src = static_cast<const uint8_t*>(e.data);
      if (e.row_bytes == rb) {
        LLM_CUDA_TRY(cudaMemcpy(dst + i * per, src, per, cudaMemcpyHostToDevice), ("upload " + name).c_str());
      } else {
        for (int64_t r = 0; r < e.rows; ++r)
          LLM_CUDA_TRY(cudaMemcpy(dst + i * per + rb * static_cast<size_t>(r), src + e.row_bytes * static_cast<size_t>(r),
                                  rb, cudaMemcpyHostToDevice),
                       ("upload " + name).c_str());
      }
    }
  } else {
    std::vector<const WeightView*> list;
    for (const WeightView& e : experts) list.push_back(&e);
    LLM_RETURN_IF_ERROR(
        UploadBf16(list, e0.rows * static_cast<int64_t>(experts.size()), e0.cols, &buf_, name));
  }
  std::vector<const uint8_t*> table(experts.size());
  for (size_t i = 0; i < experts.size(); ++i) table[i] = buf_.get<uint8_t>() + i * per;
  LLM_RETURN_IF_ERROR(table_.Allocate(table.size() * sizeof(const uint8_t*), (name + " table").c_str()));
  LLM_CUDA_TRY(cudaMemcpy(table_.get(), table.data(), table.size() * sizeof(const uint8_t*), cudaMemcpyHostToDevice),
               ("upload " + name + " table").c_str());
  s_.experts = table_.get<const uint8_t* const>();
  s_.type = quant ? type : kExpertBf16;
  s_.n_expert = static_cast<int32_t>(experts.size());
  s_.rows = static_cast<int32_t>(e0.rows);
  s_.cols = static_cast<int32_t>(e0.cols);
  s_.row_bytes = static_cast<int64_t>(rb);
  return Status::Ok();
}

}  // namespace llm::cuda
