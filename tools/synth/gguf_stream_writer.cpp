#include "gguf_stream_writer.h"

#include <cstring>

namespace llm::synth {
namespace {

template <typename T>
void Pod(std::string* s, T v) {
  s->append(reinterpret_cast<const char*>(&v), sizeof v);
}
void Str(std::string* s, std::string_view v) {
  Pod<uint64_t>(s, v.size());
  s->append(v.data(), v.size());
}

}  // namespace

GgufStreamWriter::~GgufStreamWriter() {
  if (f_ != nullptr) std::fclose(f_);
}

void GgufStreamWriter::Key(std::string_view key, uint32_t type) {
  Str(&kv_, key);
  Pod<uint32_t>(&kv_, type);
  ++n_kv_;
}

void GgufStreamWriter::AddString(std::string_view key, std::string_view v) {
  Key(key, static_cast<uint32_t>(GgufType::kString));
  Str(&kv_, v);
}
void GgufStreamWriter::AddUint32(std::string_view key, uint32_t v) {
  Key(key, static_cast<uint32_t>(GgufType::kUint32));
  Pod(&kv_, v);
}
void GgufStreamWriter::AddInt32(std::string_view key, int32_t v) {
  Key(key, static_cast<uint32_t>(GgufType::kInt32));
  Pod(&kv_, v);
}
void GgufStreamWriter::AddFloat32(std::string_view key, float v) {
  Key(key, static_cast<uint32_t>(GgufType::kFloat32));
  Pod(&kv_, v);
}
void GgufStreamWriter::AddBool(std::string_view key, bool v) {
  Key(key, static_cast<uint32_t>(GgufType::kBool));
  Pod<uint8_t>(&kv_, v ? 1 : 0);
}
void GgufStreamWriter::AddStringArray(std::string_view key, const std::vector<std::string_view>& v) {
  Key(key, static_cast<uint32_t>(GgufType::kArray));
  Pod<uint32_t>(&kv_, static_cast<uint32_t>(GgufType::kString));
  Pod<uint64_t>(&kv_, v.size());
  for (std::string_view s : v) Str(&kv_, s);
}
void GgufStreamWriter::AddFloatArray(std::string_view key, const std::vector<float>& v) {
  Key(key, static_cast<uint32_t>(GgufType::kArray));
  Pod<uint32_t>(&kv_, static_cast<uint32_t>(GgufType::kFloat32));
  Pod<uint64_t>(&kv_, v.size());
  for (float x : v) Pod(&kv_, x);
}
void GgufStreamWriter::AddInt32Array(std::string_view key, const std::vector<int32_t>& v) {
  Key(key, static_cast<uint32_t>(GgufType::kArray));
  Pod<uint32_t>(&kv_, static_cast<uint32_t>(GgufType::kInt32));
  Pod<uint64_t>(&kv_, v.size());
  for (int32_t x : v) Pod(&kv_, x);
}
void GgufStreamWriter::AddUint8Array(std::string_view key, const std::vector<uint8_t>& v) {
  Key(key, static_cast<uint32_t>(GgufType::kArray));
  Pod<uint32_t>(&kv_, static_cast<uint32_t>(GgufType::kUint8));
  Pod<uint64_t>(&kv_, v.size());
  kv_.append(reinterpret_cast<const char*>(v.data()), v.size());
}

bool GgufStreamWriter::CopyKey(const GgufFile& src, std::string_view key) {
  const auto type = src.KeyType(key);
  if (!type) return false;
  switch (*type) {
    case GgufType::kString: {
      auto v = src.GetString(key);
      if (!v.ok()) return false;
      AddString(key, *v);
      return true;
    }
    case GgufType::kBool: {
      auto v = src.GetBool(key);
      if (!v.ok()) return false;
      AddBool(key, *v);
      return true;
    }
    case GgufType::kFloat32:
    case GgufType::kFloat64: {
      auto v = src.GetFloat(key);
      if (!v.ok()) return false;
      AddFloat32(key, static_cast<float>(*v));
      return true;
    }
    case GgufType::kUint8:
    case GgufType::kUint16:
    case GgufType::kUint32:
    case GgufType::kUint64: {
      auto v = src.GetInt(key);
      if (!v.ok() || *v < 0 || *v > UINT32_MAX) return false;
      AddUint32(key, static_cast<uint32_t>(*v));
      return true;
    }
    case GgufType::kInt8:
    case GgufType::kInt16:
    case GgufType::kInt32:
    case GgufType::kInt64: {
      auto v = src.GetInt(key);
      if (!v.ok() || *v < INT32_MIN || *v > INT32_MAX) return false;
      AddInt32(key, static_cast<int32_t>(*v));
      return true;
    }
    case GgufType::kArray: {
      const auto elem = src.ArrayElemType(key);
      if (elem == GgufType::kString) {
        auto v = src.GetStringArray(key);
        if (!v.ok()) return false;
        AddStringArray(key, *v);
      } else if (elem == GgufType::kFloat32 || elem == GgufType::kFloat64) {
        auto v = src.GetFloatArray(key);
        if (!v.ok()) return false;
        AddFloatArray(key, *v);
      } else if (elem == GgufType::kUint8 || elem == GgufType::kInt8) {
        // bytes stay bytes (a SentencePiece precompiled_charsmap: llama.cpp
        // accepts no wider element type for it)
        auto v = src.GetIntArray(key);
        if (!v.ok()) return false;
        std::vector<uint8_t> w;
        w.reserve(v->size());
        for (int64_t x : *v) w.push_back(static_cast<uint8_t>(x));
        AddUint8Array(key, w);
      } else {
        auto v = src.GetIntArray(key);
        if (!v.ok()) return false;
        std::vector<int32_t> w(v->begin(), v->end());
        AddInt32Array(key, w);
      }
      return true;
    }
  }
  return false;
}

uint64_t GgufStreamWriter::AddTensor(std::string_view name, TensorType type, std::vector<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  const uint64_t bytes = TensorRowBytes(type, dims[0]) * static_cast<uint64_t>(n / dims[0]);
  data_bytes_ = (data_bytes_ + kAlign - 1) / kAlign * kAlign;
  tensors_.push_back(Tensor{std::string(name), type, std::move(dims), bytes, data_bytes_});
  data_bytes_ += bytes;
  return bytes;
}

Status GgufStreamWriter::Put(const void* p, size_t n) {
  if (n != 0 && std::fwrite(p, 1, n, f_) != n) return IoError("write " + path_ + " failed");
  return Status::Ok();
}

Status GgufStreamWriter::Pad(uint64_t to) {
  static const char zeros[kAlign] = {};
  while (data_pos_ < to) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(to - data_pos_, kAlign));
    LLM_RETURN_IF_ERROR(Put(zeros, n));
    data_pos_ += n;
  }
  return Status::Ok();
}

Status GgufStreamWriter::Begin(const std::string& path) {
  path_ = path;
  f_ = std::fopen(path.c_str(), "wb");
  if (f_ == nullptr) return IoError("cannot create " + path);
  std::string h;
  h.append("GGUF", 4);
  Pod<uint32_t>(&h, 3);
  Pod<uint64_t>(&h, tensors_.size());
  Pod<uint64_t>(&h, n_kv_);
  h += kv_;
  for (const Tensor& t : tensors_) {
    Str(&h, t.name);
    Pod<uint32_t>(&h, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) Pod<uint64_t>(&h, static_cast<uint64_t>(d));
    Pod<uint32_t>(&h, static_cast<uint32_t>(t.type));
    Pod<uint64_t>(&h, t.offset);
  }
  h.resize((h.size() + kAlign - 1) / kAlign * kAlign, '\0');
  LLM_RETURN_IF_ERROR(Put(h.data(), h.size()));
  cur_ = 0;
  cur_done_ = 0;
  data_pos_ = 0;
  if (!tensors_.empty()) LLM_RETURN_IF_ERROR(Pad(tensors_[0].offset));
  return Status::Ok();
}

Status GgufStreamWriter::Write(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    if (cur_ >= tensors_.size()) return InvalidArgument("GGUF writer: more data than the tensors hold");
    const Tensor& t = tensors_[cur_];
    const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes, t.bytes - cur_done_));
    LLM_RETURN_IF_ERROR(Put(p, n));
    p += n;
    bytes -= n;
    cur_done_ += n;
    data_pos_ += n;
    if (cur_done_ == t.bytes) {
      ++cur_;
      cur_done_ = 0;
      if (cur_ < tensors_.size()) LLM_RETURN_IF_ERROR(Pad(tensors_[cur_].offset));
    }
  }
  return Status::Ok();
}

Status GgufStreamWriter::Finish() {
  if (f_ == nullptr) return InvalidArgument("GGUF writer: Begin() was not called");
  if (cur_ != tensors_.size())
    return InvalidArgument("GGUF writer: tensor " + tensors_[cur_].name + " is missing data");
  const bool ok = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok) return IoError("closing " + path_ + " failed");
  return Status::Ok();
}

}  // namespace llm::synth
