// safetensors reader (Hugging Face's weight format) over a memory mapping or
// caller-owned memory, and the sharded form (model.safetensors.index.json).
// Nothing is copied: tensor data are views into the mapping.
//
// File layout:
//
//   u64 header_len (little-endian) | header: header_len bytes of JSON | data
//
//   header = { "__metadata__": {str: str, ...}?,
//              name: {"dtype": "BF16", "shape": [d0, d1, ...],
//                     "data_offsets": [begin, end]}, ... }
//
// Offsets are relative to the start of the data section. Open() checks the
// whole header before anything is used, as strictly as the GGUF reader: the
// header length against the file and kMaxHeaderBytes; the JSON; every
// tensor's dtype (BF16, F16, F32 accepted; others LLM_ERR_UNSUPPORTED with
// the name), shape (non-negative dims, the element count and byte size
// computed with overflow checks), extent (begin <= end <= data size, end -
// begin == elements * dtype size), that no two tensors' bytes overlap and
// that together they cover the data section without holes or trailing
// bytes (as the format requires), and that names are valid UTF-8 and unique. Failures are LLM_ERR_MODEL_FORMAT
// with the tensor's name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/tensor_type.h"
#include "util/status.h"

namespace llm {

class MmapFile;

struct SafetensorsTensor {
  std::string name;
  TensorType type = TensorType::F32;  // F32, F16 or BF16
  std::vector<int64_t> shape;         // HF order: shape[0] is the slowest (rows of a matrix)
  const void* data = nullptr;         // nullptr only when nbytes == 0
  uint64_t nbytes = 0;
  int64_t n_elements() const;
};

class SafetensorsFile {
 public:
  // Headers of real checkpoints are well under 1 MiB; 100 MB is the limit
  // the reference implementation applies too.
  static constexpr uint64_t kMaxHeaderBytes = 100u << 20;

  static StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // `data` must outlive the returned object (fuzzing, tests).
  static StatusOr<std::unique_ptr<SafetensorsFile>> FromMemory(const void* data, size_t size,
                                                               std::string label = "<memory>");
  ~SafetensorsFile();

  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* Find(std::string_view name) const;
  const std::string& label() const { return label_; }

 private:
  SafetensorsFile() = default;
  Status Parse(const uint8_t* data, size_t size);

  std::unique_ptr<MmapFile> mmap_;
  std::string label_;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
};

// The weights of a Hugging Face model directory: model.safetensors, or the
// shards model.safetensors.index.json names in its weight_map. Every shard
// the map references is opened and validated; every mapped tensor must be in
// the shard the map says, and no tensor may appear in two shards.
class SafetensorsSet {
 public:
  static StatusOr<std::unique_ptr<SafetensorsSet>> OpenDir(const std::string& dir);
  // For tests: an already-open single file.
  static std::unique_ptr<SafetensorsSet> FromFile(std::unique_ptr<SafetensorsFile> file);

  const SafetensorsTensor* Find(std::string_view name) const;
  // Every tensor of every shard (for refusing names a loader does not know).
  std::vector<const SafetensorsTensor*> All() const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string, const SafetensorsTensor*> index_;
};

}  // namespace llm
