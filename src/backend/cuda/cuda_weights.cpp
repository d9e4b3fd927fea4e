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
Status UploadBf16(std::initializer_list<const WeightView*> parts, int64_t rows, int64_t cols, DeviceBuffer* out,
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

}  // namespace

Status DeviceMatrix::Upload(std::initializer_list<const WeightView*> parts, const std::string& name,
                            bool keep_quantized) {
  buf_.Reset();
  q_ = QuantMatrix{};
  rows_ = cols_ = 0;
  if (parts.size() == 0) return InvalidArgument("CUDA backend: " + name + " has no parts");
  const int64_t cols = (*parts.begin())->cols;
  int64_t rows = 0;
  bool all_quant = keep_quantized && parts.size() <= static_cast<size_t>(kMaxQuantParts);
  for (const WeightView* p : parts) {
    if (p->empty() || p->cols != cols || p->rows <= 0)
      return InvalidArgument("CUDA backend: " + name + ": parts missing or of different widths");
    rows += p->rows;
    all_quant = all_quant && QuantTypeSupported(static_cast<uint32_t>(p->type)) &&
                TensorRowBytes(p->type, cols) != 0;
  }
  if (rows > std::numeric_limits<int32_t>::max() || cols > std::numeric_limits<int32_t>::max())
    return Unsupported("CUDA backend: " + name + " has more than 2^31 rows or columns");
  rows_ = rows;
  cols_ = cols;
  if (!all_quant) return UploadBf16(parts, rows, cols, &buf_, name);

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

}  // namespace llm::cuda
