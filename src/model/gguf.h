// GGUF (v2 and v3, little-endian) reader over a memory mapping or over
// caller-owned memory. Nothing is copied: strings, arrays and tensor data are
// views into the mapping, which lives as long as the GgufFile.
//
// Open() validates the whole header against the file size before anything is
// used: every count, string length, array extent, tensor shape, type and data
// extent. A file that passes can be read through the accessors below without
// further bounds worries; a file that fails gets LLM_ERR_MODEL_FORMAT (corrupt
// or malformed) or LLM_ERR_UNSUPPORTED (valid, but a version or tensor type
// this build does not read), with the offending key/tensor and byte offset.
//
// File layout (all little-endian):
//
//   "GGUF" u32 version | u64 n_tensors | u64 n_kv
//   n_kv x      { string key | u32 type | value }
//   n_tensors x { string name | u32 n_dims | u64 dims[n_dims] | u32 type | u64 offset }
//   padding to `general.alignment` (default 32)
//   data section: tensor i at data_offset + offset_i (offset_i aligned)
//
//   string = u64 length | bytes (no terminator)
//   array  = u32 element type | u64 count | elements
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/tensor_type.h"
#include "util/status.h"

namespace llm {

class MmapFile;

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "uint32", "array", ... ("unknown" for ids outside the enum).
const char* GgufTypeName(GgufType type);

struct GgufTensorInfo {
  std::string name;
  TensorType type = TensorType::F32;
  std::vector<int64_t> dims;  // (n_dims) dims[0] fastest (GGUF ne order)
  uint64_t offset = 0;        // absolute byte offset in the file/buffer
  uint64_t nbytes = 0;
  const void* data = nullptr;  // points into the mapping

  int64_t n_elements() const;
};

// Bytes per block and elements per block of a tensor type; false for a type
// this reader does not know.
bool TensorTypeBlock(TensorType type, uint64_t* block_elems, uint64_t* block_bytes);
const char* TensorTypeName(TensorType type);

class GgufFile {
 public:
  static StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // No copy: the caller keeps `data` alive (and unchanged) while the GgufFile
  // and anything read from it are in use.
  static StatusOr<std::unique_ptr<GgufFile>> FromMemory(const void* data, size_t size);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the data section
  const void* data() const { return base_; }
  // Whether data() is a read-only private mapping of a file (Open), whose
  // pages may be dropped and read again (MmapFile::ReleasePages); false for
  // FromMemory, whose buffer belongs to the caller.
  bool file_mapped() const { return map_ != nullptr; }
  size_t size() const { return size_; }

  // --- metadata ---------------------------------------------------------
  bool Has(std::string_view key) const;
  std::optional<GgufType> KeyType(std::string_view key) const;
  // Element type and length of an array value (nullopt: missing or not an array).
  std::optional<GgufType> ArrayElemType(std::string_view key) const;
  std::optional<uint64_t> ArrayLength(std::string_view key) const;

  // A missing key is LLM_ERR_NOT_FOUND ("missing key X"); a key of another
  // type is LLM_ERR_MODEL_FORMAT.
  StatusOr<std::string_view> GetString(std::string_view key) const;  // view into the mapping
  StatusOr<int64_t> GetInt(std::string_view key) const;    // any integer type; uint64 > INT64_MAX fails
  StatusOr<double> GetFloat(std::string_view key) const;   // float32/float64 or any integer
  StatusOr<bool> GetBool(std::string_view key) const;      // byte must be 0 or 1
  StatusOr<std::vector<std::string_view>> GetStringArray(std::string_view key) const;
  StatusOr<std::vector<float>> GetFloatArray(std::string_view key) const;    // float32/float64/integers
  StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;    // any integer elements

  std::vector<std::string_view> keys() const;  // in file order

  // --- tensors ------------------------------------------------------------
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;

 private:
  struct Kv {
    std::string_view key;
    GgufType type;
    uint64_t value_pos;   // offset of the value (for arrays: of the first element)
    GgufType elem_type;   // arrays only
    uint64_t count;       // arrays only
  };

  GgufFile() = default;
  static StatusOr<std::unique_ptr<GgufFile>> Parse(std::unique_ptr<GgufFile> f);
  Status ParseHeader();
  const Kv* Find(std::string_view key) const;
  StatusOr<const Kv*> FindTyped(std::string_view key) const;

  std::unique_ptr<MmapFile> map_;  // null for FromMemory
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<Kv> kvs_;
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace llm
