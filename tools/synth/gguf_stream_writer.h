// A streaming GGUF (v3) writer: metadata and tensor infos first, then each
// tensor's bytes in order, so multi-GB files never sit in memory.
//
//   GgufStreamWriter w;
//   w.AddString("general.architecture", "llama");
//   w.AddTensor("token_embd.weight", TensorType::BF16, {n_embd, n_vocab});   // GGUF dims: ne0 fastest
//   LLM_RETURN_IF_ERROR(w.Begin(path));               // header, key/values, tensor infos
//   LLM_RETURN_IF_ERROR(w.Write(bytes, n));            // data of tensor 0, any number of calls
//   LLM_RETURN_IF_ERROR(w.Finish());                   // checks every tensor got its bytes
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "model/gguf.h"
#include "model/tensor_type.h"
#include "util/status.h"

namespace llm::synth {

class GgufStreamWriter {
 public:
  GgufStreamWriter() = default;
  ~GgufStreamWriter();
  GgufStreamWriter(const GgufStreamWriter&) = delete;
  GgufStreamWriter& operator=(const GgufStreamWriter&) = delete;

  void AddString(std::string_view key, std::string_view v);
  void AddUint32(std::string_view key, uint32_t v);
  void AddInt32(std::string_view key, int32_t v);
  void AddFloat32(std::string_view key, float v);
  void AddBool(std::string_view key, bool v);
  void AddStringArray(std::string_view key, const std::vector<std::string_view>& v);
  void AddFloatArray(std::string_view key, const std::vector<float>& v);
  void AddInt32Array(std::string_view key, const std::vector<int32_t>& v);
  void AddUint8Array(std::string_view key, const std::vector<uint8_t>& v);
  // Copies key `key` of `src`, type and value, when it is a scalar, a string
  // or an array of strings, floats or integers; false otherwise.
  bool CopyKey(const GgufFile& src, std::string_view key);

  // dims in GGUF order (dims[0] fastest); returns the tensor's data bytes.
  uint64_t AddTensor(std::string_view name, TensorType type, std::vector<int64_t> dims);

  Status Begin(const std::string& path);
  // Appends data of the current tensor; moves to the next when one is full.
  Status Write(const void* data, size_t bytes);
  Status Finish();

 private:
  struct Tensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> dims;
    uint64_t bytes;
    uint64_t offset;  // within the data section
  };
  void Key(std::string_view key, uint32_t type);
  Status Put(const void* p, size_t n);
  Status Pad(uint64_t to);

  std::string kv_;  // encoded key/values
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
  uint64_t data_bytes_ = 0;
  static constexpr uint64_t kAlign = 32;

  std::FILE* f_ = nullptr;
  std::string path_;
  size_t cur_ = 0;          // tensor being written
  uint64_t cur_done_ = 0;   // its bytes written so far
  uint64_t data_pos_ = 0;   // bytes written into the data section
};

}  // namespace llm::synth
