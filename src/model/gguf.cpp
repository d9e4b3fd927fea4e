#include "model/gguf.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>

#include "util/mmap_file.h"
#include "util/utf8.h"

namespace llm {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader assumes a little-endian host");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxKeyLength = 65535;   // the spec's limit on key length
constexpr uint64_t kMaxTensorName = 64;     // the spec's limit on tensor names
constexpr int kMaxArrayDepth = 3;           // arrays of arrays, bounded
// Real files have tens of keys and at most a few thousand tensors. The caps
// bound the index memory a small hostile file can make the reader allocate
// (about 200 bytes per tensor, 100 per key) well inside 64 MiB.
constexpr uint64_t kMaxKvs = 65536;
constexpr uint64_t kMaxTensors = 65536;
// Smallest possible encodings, used to reject counts that cannot fit.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;                 // key len, 1-byte key, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name, n_dims, 1 dim, type, offset

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Size of a fixed-size scalar; 0 for string/array/unknown.
uint64_t ScalarSize(GgufType t) {
  switch (t) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kBool: return 1;
    case GgufType::kUint16: case GgufType::kInt16: return 2;
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kFloat32: return 4;
    case GgufType::kUint64: case GgufType::kInt64: case GgufType::kFloat64: return 8;
    default: return 0;
  }
}

bool KnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kFloat64); }

// Smallest encoding of one element of type `t` (strings: an empty string;
// arrays: an empty array).
uint64_t MinElemSize(GgufType t) {
  if (t == GgufType::kString) return 8;
  if (t == GgufType::kArray) return 4 + 8;
  return ScalarSize(t);
}

bool IsInteger(GgufType t) {
  switch (t) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kUint16: case GgufType::kInt16:
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kUint64: case GgufType::kInt64:
      return true;
    default: return false;
  }
}

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Reads integer element `p` of type `t` (IsInteger(t)); false when a uint64
// does not fit in int64.
bool LoadInt(GgufType t, const uint8_t* p, int64_t* out) {
  switch (t) {
    case GgufType::kUint8: *out = Load<uint8_t>(p); return true;
    case GgufType::kInt8: *out = Load<int8_t>(p); return true;
    case GgufType::kUint16: *out = Load<uint16_t>(p); return true;
    case GgufType::kInt16: *out = Load<int16_t>(p); return true;
    case GgufType::kUint32: *out = Load<uint32_t>(p); return true;
    case GgufType::kInt32: *out = Load<int32_t>(p); return true;
    case GgufType::kInt64: *out = Load<int64_t>(p); return true;
    case GgufType::kUint64: {
      uint64_t v = Load<uint64_t>(p);
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
      *out = static_cast<int64_t>(v);
      return true;
    }
    default: return false;
  }
}

// A bounds-checked cursor over the header.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  Status Need(uint64_t n, const char* what) const {
    if (n > remaining()) {
      return ModelFormatError(std::string("truncated file: ") + what + " at offset " +
                              std::to_string(pos_) + " needs " + std::to_string(n) +
                              " bytes, " + std::to_string(remaining()) + " left");
    }
    return Status::Ok();
  }
  template <typename T>
  Status Read(T* out, const char* what) {
    LLM_RETURN_IF_ERROR(Need(sizeof(T), what));
    std::memcpy(out, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }
  Status Skip(uint64_t n, const char* what) {
    LLM_RETURN_IF_ERROR(Need(n, what));
    pos_ += n;
    return Status::Ok();
  }
  Status ReadString(std::string_view* out, uint64_t max_len, const char* what) {
    uint64_t start = pos_;
    uint64_t len = 0;
    LLM_RETURN_IF_ERROR(Read(&len, what));
    if (len > max_len) {
      return ModelFormatError(std::string(what) + " at offset " + std::to_string(start) +
                              " has length " + std::to_string(len) + ", limit " +
                              std::to_string(max_len));
    }
    LLM_RETURN_IF_ERROR(Need(len, what));
    *out = std::string_view(reinterpret_cast<const char*>(base_ + pos_), len);
    pos_ += len;
    return Status::Ok();
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// Skips one value of type `t` (already validated as known), checking its
// extent. Arrays recurse up to kMaxArrayDepth.
Status SkipValue(Cursor& c, GgufType t, std::string_view key, int depth);

Status SkipArrayBody(Cursor& c, std::string_view key, int depth, GgufType* elem_out,
                     uint64_t* count_out) {
  uint64_t at = c.pos();
  uint32_t elem = 0;
  uint64_t count = 0;
  LLM_RETURN_IF_ERROR(c.Read(&elem, "array element type"));
  LLM_RETURN_IF_ERROR(c.Read(&count, "array length"));
  std::string where = "key '" + std::string(key) + "' at offset " + std::to_string(at);
  if (!KnownType(elem)) {
    return ModelFormatError(where + ": unknown array element type " + std::to_string(elem));
  }
  GgufType et = static_cast<GgufType>(elem);
  if (et == GgufType::kArray && depth + 1 >= kMaxArrayDepth) {
    return ModelFormatError(where + ": arrays nested deeper than " +
                            std::to_string(kMaxArrayDepth));
  }
  uint64_t min = MinElemSize(et);
  if (count > c.remaining() / min) {
    return ModelFormatError(where + ": array of " + std::to_string(count) + " " +
                            GgufTypeName(et) + " elements cannot fit in the " +
                            std::to_string(c.remaining()) + " bytes left");
  }
  if (elem_out) *elem_out = et;
  if (count_out) *count_out = count;
  uint64_t fixed = ScalarSize(et);
  if (fixed != 0) return c.Skip(count * fixed, "array data");  // fits: checked above
  for (uint64_t i = 0; i < count; ++i) {
    if (et == GgufType::kString) {
      std::string_view s;
      LLM_RETURN_IF_ERROR(c.ReadString(&s, UINT64_MAX, "array string"));
    } else {
      LLM_RETURN_IF_ERROR(SkipArrayBody(c, key, depth + 1, nullptr, nullptr));
    }
  }
  return Status::Ok();
}

Status SkipValue(Cursor& c, GgufType t, std::string_view key, int depth) {
  if (t == GgufType::kString) {
    std::string_view s;
    return c.ReadString(&s, UINT64_MAX, "string value");
  }
  if (t == GgufType::kArray) return SkipArrayBody(c, key, depth, nullptr, nullptr);
  return c.Skip(ScalarSize(t), "scalar value");
}

}  // namespace

const char* GgufTypeName(GgufType type) {
  switch (type) {
    case GgufType::kUint8: return "uint8";
    case GgufType::kInt8: return "int8";
    case GgufType::kUint16: return "uint16";
    case GgufType::kInt16: return "int16";
    case GgufType::kUint32: return "uint32";
    case GgufType::kInt32: return "int32";
    case GgufType::kFloat32: return "float32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kUint64: return "uint64";
    case GgufType::kInt64: return "int64";
    case GgufType::kFloat64: return "float64";
  }
  return "unknown";
}

bool TensorTypeBlock(TensorType type, uint64_t* block_elems, uint64_t* block_bytes) {
  int64_t elems = 0, bytes = 0;
  if (!TensorTypeLayout(type, &elems, &bytes)) return false;  // table: tensor_type.h
  *block_elems = static_cast<uint64_t>(elems);
  *block_bytes = static_cast<uint64_t>(bytes);
  return true;
}

const char* TensorTypeName(TensorType type) {
  switch (type) {
    case TensorType::F32: return "F32";
    case TensorType::F16: return "F16";
    case TensorType::BF16: return "BF16";
    case TensorType::Q8_0: return "Q8_0";
    case TensorType::Q4_0: return "Q4_0";
    case TensorType::Q4_1: return "Q4_1";
    case TensorType::Q5_0: return "Q5_0";
    case TensorType::Q5_1: return "Q5_1";
    case TensorType::Q4_K: return "Q4_K";
    case TensorType::Q5_K: return "Q5_K";
    case TensorType::Q6_K: return "Q6_K";
    case TensorType::Q2_K: return "Q2_K";
    case TensorType::Q3_K: return "Q3_K";
    case TensorType::IQ4_NL: return "IQ4_NL";
    case TensorType::IQ4_XS: return "IQ4_XS";
    case TensorType::IQ2_XXS: return "IQ2_XXS";
    case TensorType::IQ2_XS: return "IQ2_XS";
    case TensorType::IQ3_XXS: return "IQ3_XXS";
    case TensorType::IQ3_S: return "IQ3_S";
    case TensorType::IQ2_S: return "IQ2_S";
    case TensorType::TQ1_0: return "TQ1_0";
    case TensorType::IQ1_S: return "IQ1_S";
    case TensorType::IQ1_M: return "IQ1_M";
    case TensorType::TQ2_0: return "TQ2_0";
    case TensorType::MXFP4: return "MXFP4";
  }
  return "unknown";
}

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // validated at load: no overflow
  return n;
}

GgufFile::~GgufFile() = default;

StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  LLM_ASSIGN_OR_RETURN(auto map, MmapFile::Open(path));
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->base_ = static_cast<const uint8_t*>(map->data());
  f->size_ = map->size();
  f->map_ = std::move(map);
  auto r = Parse(std::move(f));
  if (!r.ok()) return Status(r.status().code(), path + ": " + r.status().message());
  return r;
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromMemory(const void* data, size_t size) {
  if (data == nullptr && size != 0) return InvalidArgument("GGUF buffer is NULL");
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->base_ = static_cast<const uint8_t*>(data);
  f->size_ = size;
  return Parse(std::move(f));
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::Parse(std::unique_ptr<GgufFile> f) {
  LLM_RETURN_IF_ERROR(f->ParseHeader());
  return f;
}

Status GgufFile::ParseHeader() {
  if (size_ < 8 || base_ == nullptr) {
    return ModelFormatError("not a GGUF file: " + std::to_string(size_) +
                            " bytes, too small for a header");
  }
  Cursor c(base_, size_);
  uint32_t magic = 0;
  LLM_RETURN_IF_ERROR(c.Read(&magic, "magic"));
  if (magic != kMagic) return ModelFormatError("not a GGUF file: bad magic " + Hex(magic));
  LLM_RETURN_IF_ERROR(c.Read(&version_, "version"));
  if (version_ == 1) {
    return Unsupported("GGUF version 1 (32-bit counts) is not supported; convert to v3");
  }
  if (version_ != 2 && version_ != 3) {
    if ((version_ & 0xffff) == 0 && __builtin_bswap32(version_) <= 3) {
      return Unsupported("big-endian GGUF files are not supported");
    }
    return Unsupported("GGUF version " + std::to_string(version_) + " is not supported");
  }
  uint64_t n_tensors = 0, n_kv = 0;
  LLM_RETURN_IF_ERROR(c.Read(&n_tensors, "tensor count"));
  LLM_RETURN_IF_ERROR(c.Read(&n_kv, "metadata count"));
  if (n_kv > kMaxKvs || n_tensors > kMaxTensors) {
    return ModelFormatError("header claims " + std::to_string(n_kv) + " metadata entries and " +
                            std::to_string(n_tensors) + " tensors; at most " +
                            std::to_string(kMaxKvs) + " and " + std::to_string(kMaxTensors) +
                            " are read");
  }
  if (n_kv > c.remaining() / kMinKvBytes || n_tensors > c.remaining() / kMinTensorInfoBytes ||
      n_kv * kMinKvBytes + n_tensors * kMinTensorInfoBytes > c.remaining()) {
    return ModelFormatError("header claims " + std::to_string(n_kv) + " metadata entries and " +
                            std::to_string(n_tensors) + " tensors, which cannot fit in " +
                            std::to_string(size_) + " bytes");
  }

  // --- metadata ---
  kvs_.reserve(n_kv);
  kv_index_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    uint64_t at = c.pos();
    Kv kv{};
    LLM_RETURN_IF_ERROR(c.ReadString(&kv.key, kMaxKeyLength, "metadata key"));
    if (kv.key.empty()) {
      return ModelFormatError("empty metadata key at offset " + std::to_string(at));
    }
    if (!IsValidUtf8(kv.key)) {
      return ModelFormatError("metadata key at offset " + std::to_string(at) +
                              " is not valid UTF-8");
    }
    uint32_t type = 0;
    LLM_RETURN_IF_ERROR(c.Read(&type, "metadata value type"));
    if (!KnownType(type)) {
      return ModelFormatError("key '" + std::string(kv.key) + "' at offset " +
                              std::to_string(at) + " has unknown value type " +
                              std::to_string(type));
    }
    kv.type = static_cast<GgufType>(type);
    if (kv.type == GgufType::kArray) {
      uint64_t body = c.pos();
      LLM_RETURN_IF_ERROR(SkipArrayBody(c, kv.key, 0, &kv.elem_type, &kv.count));
      kv.value_pos = body + 12;
    } else {
      kv.value_pos = c.pos();
      LLM_RETURN_IF_ERROR(SkipValue(c, kv.type, kv.key, 0));
    }
    if (!kv_index_.emplace(kv.key, kvs_.size()).second) {
      return ModelFormatError("duplicate metadata key '" + std::string(kv.key) + "' at offset " +
                              std::to_string(at));
    }
    kvs_.push_back(kv);
  }

  // --- alignment ---
  if (const Kv* a = Find("general.alignment")) {
    if (a->type != GgufType::kUint32) {
      return ModelFormatError(std::string("general.alignment must be uint32, not ") +
                              GgufTypeName(a->type));
    }
    uint32_t v = Load<uint32_t>(base_ + a->value_pos);
    if (v == 0 || (v & (v - 1)) != 0) {
      return ModelFormatError("general.alignment " + std::to_string(v) +
                              " is not a power of two");
    }
    alignment_ = v;
  } else {
    alignment_ = kDefaultAlignment;
  }

  // --- tensor infos ---
  if (n_tensors > c.remaining() / kMinTensorInfoBytes) {
    return ModelFormatError(std::to_string(n_tensors) + " tensor infos cannot fit in the " +
                            std::to_string(c.remaining()) + " bytes after the metadata");
  }
  struct RawTensor {
    std::string_view name;
    uint64_t at;
    uint64_t rel_offset;
  };
  std::vector<RawTensor> raw;
  raw.reserve(n_tensors);
  tensors_.reserve(n_tensors);
  tensor_index_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    RawTensor r{};
    r.at = c.pos();
    LLM_RETURN_IF_ERROR(c.ReadString(&r.name, kMaxTensorName, "tensor name"));
    std::string where = "tensor '" + std::string(r.name) + "' (info at offset " +
                        std::to_string(r.at) + ")";
    if (r.name.empty()) return ModelFormatError("empty tensor name at offset " + std::to_string(r.at));
    if (!IsValidUtf8(r.name)) {
      return ModelFormatError("tensor name at offset " + std::to_string(r.at) + " is not valid UTF-8");
    }
    uint32_t n_dims = 0;
    LLM_RETURN_IF_ERROR(c.Read(&n_dims, "tensor n_dims"));
    if (n_dims < 1 || n_dims > kMaxDims) {
      return ModelFormatError(where + " has " + std::to_string(n_dims) +
                              " dimensions; 1 to 4 allowed");
    }
    GgufTensorInfo t;
    t.name = std::string(r.name);
    t.dims.resize(n_dims);
    uint64_t n_elem = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t v = 0;
      LLM_RETURN_IF_ERROR(c.Read(&v, "tensor dimension"));
      if (v == 0 || v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          n_elem > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / v) {
        return ModelFormatError(where + ": dimension " + std::to_string(d) + " = " +
                                std::to_string(v) +
                                " is zero or makes the element count overflow");
      }
      n_elem *= v;
      t.dims[d] = static_cast<int64_t>(v);
    }
    uint32_t type = 0;
    LLM_RETURN_IF_ERROR(c.Read(&type, "tensor type"));
    uint64_t block_elems = 0, block_bytes = 0;
    if (!TensorTypeBlock(static_cast<TensorType>(type), &block_elems, &block_bytes)) {
      return Unsupported(where + " has tensor type " + std::to_string(type) +
                         ", which this build does not read (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
                         "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS, "
                         "MXFP4, TQ1_0, TQ2_0)");
    }
    t.type = static_cast<TensorType>(type);
    if (t.dims[0] % static_cast<int64_t>(block_elems) != 0) {
      return ModelFormatError(where + ": " + TensorTypeName(t.type) + " row of " +
                              std::to_string(t.dims[0]) + " elements is not a multiple of " +
                              std::to_string(block_elems));
    }
    uint64_t n_blocks = n_elem / block_elems;
    if (n_blocks > std::numeric_limits<uint64_t>::max() / block_bytes) {
      return ModelFormatError(where + ": byte size overflows");
    }
    t.nbytes = n_blocks * block_bytes;
    LLM_RETURN_IF_ERROR(c.Read(&r.rel_offset, "tensor offset"));
    if (r.rel_offset % alignment_ != 0) {
      return ModelFormatError(where + ": data offset " + std::to_string(r.rel_offset) +
                              " is not a multiple of the alignment " + std::to_string(alignment_));
    }
    if (!tensor_index_.emplace(r.name, tensors_.size()).second) {
      return ModelFormatError("duplicate tensor name '" + std::string(r.name) +
                              "' at offset " + std::to_string(r.at));
    }
    tensors_.push_back(std::move(t));
    raw.push_back(r);
  }

  // --- data section ---
  uint64_t end = c.pos();
  data_offset_ = end + (alignment_ - end % alignment_) % alignment_;  // no overflow: end < size
  for (size_t i = 0; i < tensors_.size(); ++i) {
    GgufTensorInfo& t = tensors_[i];
    const RawTensor& r = raw[i];
    uint64_t avail = size_ > data_offset_ ? size_ - data_offset_ : 0;
    if (r.rel_offset > avail || t.nbytes > avail - r.rel_offset) {
      return ModelFormatError("tensor '" + t.name + "' (info at offset " + std::to_string(r.at) +
                              ") data [" + std::to_string(r.rel_offset) + ", +" +
                              std::to_string(t.nbytes) + ") extends past the end of the file (" +
                              std::to_string(avail) + " data bytes)");
    }
    t.offset = data_offset_ + r.rel_offset;
    t.data = base_ + t.offset;
  }
  // No two tensors may share bytes: a writer never overlaps them, and a
  // file that does is corrupt or crafted.
  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensorInfo& prev = tensors_[order[i - 1]];
    const GgufTensorInfo& cur = tensors_[order[i]];
    if (prev.offset + prev.nbytes > cur.offset) {  // both extents checked above: no overflow
      return ModelFormatError("tensor '" + cur.name + "' data at offset " +
                              std::to_string(cur.offset) + " overlaps tensor '" + prev.name +
                              "' [" + std::to_string(prev.offset) + ", +" +
                              std::to_string(prev.nbytes) + ")");
    }
  }
  return Status::Ok();
}

// --------------------------------------------------------------- metadata

const GgufFile::Kv* GgufFile::Find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second];
}

StatusOr<const GgufFile::Kv*> GgufFile::FindTyped(std::string_view key) const {
  const Kv* kv = Find(key);
  if (kv == nullptr) return Status(LLM_ERR_NOT_FOUND, "missing key " + std::string(key));
  return kv;
}

namespace {
Status WrongType(std::string_view key, GgufType got, GgufType elem, const char* want) {
  std::string is = GgufTypeName(got);
  if (got == GgufType::kArray) is += std::string(" of ") + GgufTypeName(elem);
  return ModelFormatError("key " + std::string(key) + " is " + is + ", expected " + want);
}
}  // namespace

bool GgufFile::Has(std::string_view key) const { return Find(key) != nullptr; }

std::optional<GgufType> GgufFile::KeyType(std::string_view key) const {
  const Kv* kv = Find(key);
  if (kv == nullptr) return std::nullopt;
  return kv->type;
}

std::optional<GgufType> GgufFile::ArrayElemType(std::string_view key) const {
  const Kv* kv = Find(key);
  if (kv == nullptr || kv->type != GgufType::kArray) return std::nullopt;
  return kv->elem_type;
}

std::optional<uint64_t> GgufFile::ArrayLength(std::string_view key) const {
  const Kv* kv = Find(key);
  if (kv == nullptr || kv->type != GgufType::kArray) return std::nullopt;
  return kv->count;
}

StatusOr<std::string_view> GgufFile::GetString(std::string_view key) const {
  LLM_ASSIGN_OR_RETURN(const Kv* kv, FindTyped(key));
  if (kv->type != GgufType::kString) return WrongType(key, kv->type, kv->elem_type, "string");
  uint64_t len = Load<uint64_t>(base_ + kv->value_pos);  // validated at load
  return std::string_view(reinterpret_cast<const char*>(base_ + kv->value_pos + 8), len);
}

StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  LLM_ASSIGN_OR_RETURN(const Kv* kv, FindTyped(key));
  if (!IsInteger(kv->type)) return WrongType(key, kv->type, kv->elem_type, "an integer");
  int64_t v = 0;
  if (!LoadInt(kv->type, base_ + kv->value_pos, &v)) {
    return ModelFormatError("key " + std::string(key) + ": uint64 value does not fit in int64");
  }
  return v;
}

StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  LLM_ASSIGN_OR_RETURN(const Kv* kv, FindTyped(key));
  const uint8_t* p = base_ + kv->value_pos;
  if (kv->type == GgufType::kFloat32) return static_cast<double>(Load<float>(p));
  if (kv->type == GgufType::kFloat64) return Load<double>(p);
  if (kv->type == GgufType::kUint64) return static_cast<double>(Load<uint64_t>(p));
  int64_t v = 0;
  if (IsInteger(kv->type) && LoadInt(kv->type, p, &v)) return static_cast<double>(v);
  return WrongType(key, kv->type, kv->elem_type, "a number");
}

StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  LLM_ASSIGN_OR_RETURN(const Kv* kv, FindTyped(key));
  if (kv->type != GgufType::kBool) return WrongType(key, kv->type, kv->elem_type, "bool");
  uint8_t b = base_[kv->value_pos];
  if (b > 1) {
    return ModelFormatError("key " + std::string(key) + ": bool byte is " + std::to_string(b));
  }
  return b == 1;
}

StatusOr<std::vector<std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  LLM_ASSIGN_OR_RETURN(const Kv* kv, FindTyped(key));
  if (kv->type != GgufType::kArray || kv->elem_type != GgufType::kString) {
    return WrongType(key, kv->type, kv->elem_type, "array of string");
  }
  std::vector<std::string_view> out;
  out.reserve(kv->count);
  uint64_t pos = kv->value_pos;  // every length and extent was validated at load
  for (uint64_t i = 0; i < kv->count; ++i) {
    uint64_t len = Load<uint64_t>(base_ + pos);
    out.emplace_back(reinterpret_cast<const char*>(base_ + pos + 8), len);
    pos += 8 + len;
  }
  return out;
}

StatusOr<std::vector<float>> GgufFile::GetFloatArray(std::string_view key) const {
  LLM_ASSIGN_OR_RETURN(const Kv* kv, FindTyped(key));
  GgufType et = kv->elem_type;
  if (kv->type != GgufType::kArray || !(et == GgufType::kFloat32 || et == GgufType::kFloat64 ||
                                        IsInteger(et))) {
    return WrongType(key, kv->type, kv->elem_type, "array of numbers");
  }
  std::vector<float> out(kv->count);
  const uint8_t* p = base_ + kv->value_pos;
  if (et == GgufType::kFloat32) {
    if (kv->count) std::memcpy(out.data(), p, kv->count * sizeof(float));
    return out;
  }
  uint64_t w = ScalarSize(et);
  for (uint64_t i = 0; i < kv->count; ++i, p += w) {
    if (et == GgufType::kFloat64) {
      out[i] = static_cast<float>(Load<double>(p));
    } else if (et == GgufType::kUint64) {
      out[i] = static_cast<float>(Load<uint64_t>(p));
    } else {
      int64_t v = 0;
      LoadInt(et, p, &v);
      out[i] = static_cast<float>(v);
    }
  }
  return out;
}

StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  LLM_ASSIGN_OR_RETURN(const Kv* kv, FindTyped(key));
  if (kv->type != GgufType::kArray || !IsInteger(kv->elem_type)) {
    return WrongType(key, kv->type, kv->elem_type, "array of integers");
  }
  std::vector<int64_t> out(kv->count);
  const uint8_t* p = base_ + kv->value_pos;
  uint64_t w = ScalarSize(kv->elem_type);
  for (uint64_t i = 0; i < kv->count; ++i, p += w) {
    if (!LoadInt(kv->elem_type, p, &out[i])) {
      return ModelFormatError("key " + std::string(key) + ": element " + std::to_string(i) +
                              " (uint64) does not fit in int64");
    }
  }
  return out;
}

std::vector<std::string_view> GgufFile::keys() const {
  std::vector<std::string_view> out;
  out.reserve(kvs_.size());
  for (const Kv& kv : kvs_) out.push_back(kv.key);
  return out;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace llm
