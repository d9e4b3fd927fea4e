// A small GGUF writer for tests: builds valid files, and hostile ones (raw
// values, any type id, any offset), in memory or on disk.
//
//   GgufWriter w;
//   w.AddString("general.architecture", "llama").AddUint32("llama.block_count", 2);
//   w.AddTensor("token_embd.weight", TensorType::F32, {32, 64}, bytes);
//   std::string file = w.Serialize();
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/gguf.h"
#include "model/tensor_type.h"
#include "util/status.h"

namespace llm::test {

// Little-endian encodings of GGUF primitives.
template <typename T>
std::string EncodePod(T v) {
  std::string s(sizeof v, '\0');
  std::memcpy(s.data(), &v, sizeof v);
  return s;
}
std::string EncodeString(std::string_view s);  // u64 length + bytes

// Bytes a tensor of `type` with these dims needs (0 for an unknown type).
uint64_t TensorBytes(TensorType type, const std::vector<int64_t>& dims);

class GgufWriter {
 public:
  GgufWriter& SetVersion(uint32_t v) { version_ = v; return *this; }
  // Alignment of the data section and of tensor offsets. `write_key` also
  // stores it as general.alignment (uint32). Values that are not a power of
  // two up to 65536 are written to the key only; the layout uses 32.
  GgufWriter& SetAlignment(uint32_t a, bool write_key = true);

  GgufWriter& AddUint8(std::string_view key, uint8_t v);
  GgufWriter& AddInt8(std::string_view key, int8_t v);
  GgufWriter& AddUint16(std::string_view key, uint16_t v);
  GgufWriter& AddInt16(std::string_view key, int16_t v);
  GgufWriter& AddUint32(std::string_view key, uint32_t v);
  GgufWriter& AddInt32(std::string_view key, int32_t v);
  GgufWriter& AddUint64(std::string_view key, uint64_t v);
  GgufWriter& AddInt64(std::string_view key, int64_t v);
  GgufWriter& AddFloat32(std::string_view key, float v);
  GgufWriter& AddFloat64(std::string_view key, double v);
  GgufWriter& AddBool(std::string_view key, bool v);
  GgufWriter& AddString(std::string_view key, std::string_view v);
  GgufWriter& AddStringArray(std::string_view key, const std::vector<std::string>& v);
  GgufWriter& AddFloatArray(std::string_view key, const std::vector<float>& v);
  GgufWriter& AddInt32Array(std::string_view key, const std::vector<int32_t>& v);
  // An array whose elements are already encoded in `elems` (count is written
  // as given, so it may lie).
  GgufWriter& AddArray(std::string_view key, GgufType elem, uint64_t count, std::string elems);
  // Any type id and any value bytes, for hostile files.
  GgufWriter& AddRawKv(std::string_view key, uint32_t type, std::string value);

  // A tensor whose data follows the previous one at the next aligned offset.
  // `data` is written as given; an empty `data` writes TensorBytes() zeros.
  GgufWriter& AddTensor(std::string_view name, TensorType type, std::vector<int64_t> dims,
                        std::string data = {});
  // Hostile form: any type id, raw dims, and an optional offset written in
  // place of the computed one (its data bytes are still appended).
  GgufWriter& AddTensorRaw(std::string_view name, uint32_t type, std::vector<uint64_t> dims,
                           std::string data, std::optional<uint64_t> offset = std::nullopt);
  // Overrides the counts written in the header (hostile files).
  GgufWriter& SetCounts(std::optional<uint64_t> n_tensors, std::optional<uint64_t> n_kv);

  std::string Serialize() const;
  Status WriteTo(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> dims;
    std::string data;
    std::optional<uint64_t> offset;
  };
  GgufWriter& Kv(std::string_view key, GgufType type, std::string value);

  uint32_t version_ = 3;
  uint32_t alignment_ = 32;
  std::vector<std::string> kvs_;  // encoded key + type + value
  std::vector<Tensor> tensors_;
  std::optional<uint64_t> n_tensors_override_, n_kv_override_;
};

// A tiny, valid, randomly initialised llama model (n_embd 32, 2 layers by
// default) with a SentencePiece-style vocabulary: <unk> <s> </s>, the 256
// byte tokens <0x00>..<0xFF>, then "▁a".. pieces up to n_vocab.
struct TinyLlamaOptions {
  int n_vocab = 288;
  int n_embd = 32;
  int n_layer = 2;
  int n_head = 4;
  int n_head_kv = 2;
  int n_ff = 64;
  int n_ctx = 128;
  TensorType matrix_type = TensorType::F32;  // any TensorType (cols % 32 == 0 for quants)
  bool tied = false;                         // omit output.weight
  uint32_t seed = 1;
};
GgufWriter MakeTinyLlama(const TinyLlamaOptions& opt = {});

}  // namespace llm::test
