// The tensor lookup ModelWeights' GGUF readers share (weights.cpp,
// weights_bert.cpp): find a tensor by name, check its shape and type.
#pragma once

#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/weights.h"

namespace llm {
namespace weights_internal {

enum class Kind { kNorm, kMatrix };  // kNorm: any F32 vector (norm weights, biases)

inline std::string Shape(const std::vector<int64_t>& dims) {
  std::string s = "{";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "}";
}

class Loader {
 public:
  explicit Loader(const GgufFile& f) : f_(f) {}

  // Finds `name` and checks it is (rows, cols) — GGUF dims {cols, rows}, or
  // {cols} for a norm — with a type the backends read.
  Status Get(const std::string& name, Kind kind, int64_t rows, int64_t cols, WeightView* out,
             bool optional = false) {
    const GgufTensorInfo* t = f_.FindTensor(name);
    if (t == nullptr) {
      if (optional) return Status::Ok();
      return ModelFormatError("missing tensor " + name);
    }
    std::vector<int64_t> want = kind == Kind::kNorm ? std::vector<int64_t>{cols}
                                                    : std::vector<int64_t>{cols, rows};
    if (t->dims != want) {
      return ModelFormatError("tensor " + name + " has shape " + Shape(t->dims) + ", expected " +
                              Shape(want) + " from the model config");
    }
    if (kind == Kind::kNorm) {
      if (t->type != TensorType::F32) {
        return Unsupported("tensor " + name + " is " + TensorTypeName(t->type) +
                           "; norm weights and biases must be F32");
      }
    }
    // Every type the GGUF reader accepts (tensor_type.h) is a matrix type the
    // CPU backend reads; a row must be whole blocks of it.
    size_t row_bytes = TensorRowBytes(t->type, cols);
    if (row_bytes == 0 || row_bytes * static_cast<uint64_t>(rows) != t->nbytes) {
      return ModelFormatError("tensor " + name + ": " + std::to_string(cols) +
                              " columns do not make whole " + TensorTypeName(t->type) + " rows");
    }
    out->type = t->type;
    out->data = t->data;
    out->rows = rows;
    out->cols = cols;
    out->row_bytes = row_bytes;
    n_params_ += t->n_elements();
    return Status::Ok();
  }

  // A 3-D tensor of n_mat matrices (rows, cols) — GGUF dims {cols, rows,
  // n_mat} — as n_mat row-range views of one (n_mat * rows, cols) matrix.
  Status GetStack(const std::string& name, int64_t n_mat, int64_t rows, int64_t cols, std::vector<WeightView>* out) {
    const GgufTensorInfo* t = f_.FindTensor(name);
    if (t == nullptr) return ModelFormatError("missing tensor " + name);
    const std::vector<int64_t> want = {cols, rows, n_mat};
    if (t->dims != want)
      return ModelFormatError("tensor " + name + " has shape " + Shape(t->dims) + ", expected " + Shape(want) +
                              " from the model config");
    const size_t row_bytes = TensorRowBytes(t->type, cols);
    if (row_bytes == 0 || row_bytes * static_cast<uint64_t>(rows * n_mat) != t->nbytes)
      return ModelFormatError("tensor " + name + ": " + std::to_string(cols) + " columns do not make whole " +
                              TensorTypeName(t->type) + " rows");
    out->clear();
    for (int64_t e = 0; e < n_mat; ++e) {
      WeightView v;
      v.type = t->type;
      v.data = static_cast<const uint8_t*>(t->data) + e * rows * row_bytes;
      v.rows = rows;
      v.cols = cols;
      v.row_bytes = row_bytes;
      out->push_back(v);
    }
    n_params_ += t->n_elements();
    return Status::Ok();
  }

  int64_t n_params() const { return n_params_; }

 private:
  const GgufFile& f_;
  int64_t n_params_ = 0;
};

}  // namespace weights_internal
}  // namespace llm
