// SafetensorsFile / SafetensorsSet: see safetensors.h for what is checked.
#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>

#include "util/json.h"
#include "util/mmap_file.h"
#include "util/utf8.h"

namespace llm {
namespace {

// Real tensors have at most a handful of dims; the bound keeps a hostile
// header from making the element-count loop and the shape vectors large.
constexpr size_t kMaxDims = 8;

// A printable form of a (possibly non-UTF-8) name for error messages.
std::string Quote(std::string_view name) {
  if (IsValidUtf8(name) && name.size() <= 200) return "'" + std::string(name) + "'";
  std::string s = "'";
  for (char ch : name.substr(0, 200)) {
    auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      s += ch;
    } else {
      static const char* kHex = "0123456789abcdef";
      s += "\\x";
      s += kHex[c >> 4];
      s += kHex[c & 15];
    }
  }
  return s + (name.size() > 200 ? "...'" : "'");
}

bool ParseDtype(const std::string& s, TensorType* t, size_t* elem_bytes) {
  if (s == "F32") return *t = TensorType::F32, *elem_bytes = 4, true;
  if (s == "F16") return *t = TensorType::F16, *elem_bytes = 2, true;
  if (s == "BF16") return *t = TensorType::BF16, *elem_bytes = 2, true;
  return false;
}

// A JSON number that is an exact non-negative integer.
bool AsU64(const Json& j, uint64_t* out) {
  if (!j.is_int() || j.as_int() < 0) return false;
  *out = static_cast<uint64_t>(j.as_int());
  return true;
}

StatusOr<std::string> ReadSmallFile(const std::string& path) {
  LLM_ASSIGN_OR_RETURN(auto m, MmapFile::Open(path));
  if (m->size() > (64u << 20)) return ModelFormatError(path + " is larger than 64 MiB");
  return std::string(static_cast<const char*>(m->data()), m->size());
}

}  // namespace

int64_t SafetensorsTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // bounded by the checks in Parse
  return n;
}

SafetensorsFile::~SafetensorsFile() = default;

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  LLM_ASSIGN_OR_RETURN(auto m, MmapFile::Open(path));
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->label_ = path;
  LLM_RETURN_IF_ERROR(f->Parse(static_cast<const uint8_t*>(m->data()), m->size()));
  f->mmap_ = std::move(m);
  return f;
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::FromMemory(const void* data, size_t size,
                                                                       std::string label) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->label_ = std::move(label);
  LLM_RETURN_IF_ERROR(f->Parse(static_cast<const uint8_t*>(data), size));
  return f;
}

const SafetensorsTensor* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Status SafetensorsFile::Parse(const uint8_t* data, size_t size) {
  const std::string where = label_ + ": ";
  if (size < 8 || data == nullptr) {
    return ModelFormatError(where + "file of " + std::to_string(size) +
                            " bytes is too short for a safetensors header length");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | data[i];
  if (header_len > kMaxHeaderBytes) {
    return ModelFormatError(where + "header length " + std::to_string(header_len) + " exceeds the " +
                            std::to_string(kMaxHeaderBytes) + "-byte limit");
  }
  if (header_len > size - 8) {
    return ModelFormatError(where + "header length " + std::to_string(header_len) + " runs past the end of the " +
                            std::to_string(size) + "-byte file (truncated?)");
  }
  const std::string_view header(reinterpret_cast<const char*>(data + 8), static_cast<size_t>(header_len));
  const uint8_t* base = data + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;

  auto parsed = ParseJson(header, 64);
  if (!parsed.ok()) return ModelFormatError(where + "header is not valid JSON: " + parsed.status().message());
  const Json& root = parsed.value();
  if (!root.is_object()) return ModelFormatError(where + "header is not a JSON object");

  struct Extent {
    uint64_t begin, end;
    size_t tensor;
  };
  std::vector<Extent> extents;
  for (const auto& [name, t] : root.object()) {
    if (!IsValidUtf8(name)) return ModelFormatError(where + "tensor name " + Quote(name) + " is not valid UTF-8");
    if (name == "__metadata__") {
      // Free-form string pairs (format, producer): checked for shape, not used.
      if (!t.is_object()) return ModelFormatError(where + "__metadata__ is not an object");
      for (const auto& [k, v] : t.object()) {
        if (!v.is_string() || !IsValidUtf8(k))
          return ModelFormatError(where + "__metadata__ entry " + Quote(k) + " is not a string");
      }
      continue;
    }
    const std::string tn = where + "tensor " + Quote(name) + ": ";
    if (name.empty()) return ModelFormatError(where + "a tensor has an empty name");
    if (index_.count(name)) return ModelFormatError(tn + "appears twice in the header");
    if (!t.is_object()) return ModelFormatError(tn + "entry is not an object");
    for (const auto& [k, v] : t.object()) {
      (void)v;
      if (k != "dtype" && k != "shape" && k != "data_offsets")
        return ModelFormatError(tn + "unknown field " + Quote(k));
    }
    const Json* dtype = t.Find("dtype");
    const Json* shape = t.Find("shape");
    const Json* offs = t.Find("data_offsets");
    if (dtype == nullptr || !dtype->is_string()) return ModelFormatError(tn + "missing or non-string dtype");
    if (shape == nullptr || !shape->is_array()) return ModelFormatError(tn + "missing or non-array shape");
    if (offs == nullptr || !offs->is_array() || offs->size() != 2)
      return ModelFormatError(tn + "data_offsets is not a [begin, end] pair");

    SafetensorsTensor st;
    st.name = name;
    size_t elem_bytes = 0;
    if (!ParseDtype(dtype->as_string(), &st.type, &elem_bytes)) {
      return Unsupported(tn + "dtype " + Quote(dtype->as_string()) + " is not supported (only BF16, F16 and F32)");
    }
    if (shape->size() > kMaxDims)
      return ModelFormatError(tn + "has " + std::to_string(shape->size()) + " dims (at most " +
                              std::to_string(kMaxDims) + ")");
    // bytes = product(shape) * elem_bytes, each step checked against
    // overflow; a zero dim makes an empty tensor.
    uint64_t bytes = elem_bytes;
    bool overflow = false;
    for (const Json& d : shape->array()) {
      uint64_t v = 0;
      if (!AsU64(d, &v)) return ModelFormatError(tn + "shape has a dim that is not a non-negative integer");
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return ModelFormatError(tn + "dim " + std::to_string(v) + " is too large");
      st.shape.push_back(static_cast<int64_t>(v));
      if (v != 0 && bytes > std::numeric_limits<uint64_t>::max() / v) overflow = true;
      if (!overflow) bytes *= v;
    }
    if (overflow) {
      bool any_zero = std::find(st.shape.begin(), st.shape.end(), 0) != st.shape.end();
      if (!any_zero) return ModelFormatError(tn + "shape's byte size overflows 64 bits");
      bytes = 0;
    }
    uint64_t begin = 0, end = 0;
    if (!AsU64(offs->array()[0], &begin) || !AsU64(offs->array()[1], &end))
      return ModelFormatError(tn + "data_offsets are not non-negative integers");
    if (begin > end)
      return ModelFormatError(tn + "data_offsets begin " + std::to_string(begin) + " > end " + std::to_string(end));
    if (end > data_size)
      return ModelFormatError(tn + "data_offsets end " + std::to_string(end) + " is past the " +
                              std::to_string(data_size) + "-byte data section (truncated?)");
    if (end - begin != bytes)
      return ModelFormatError(tn + "holds " + std::to_string(end - begin) + " bytes but its dtype and shape need " +
                              std::to_string(bytes));
    st.nbytes = bytes;
    st.data = bytes ? base + begin : nullptr;
    index_.emplace(name, tensors_.size());
    if (bytes) extents.push_back({begin, end, tensors_.size()});
    tensors_.push_back(std::move(st));
  }
  // No two tensors may share a byte: sorted by begin, each must end before
  // the next begins. And, as the format requires (so that a file cannot
  // hide a second payload: a polyglot), the tensors cover the data section
  // without holes.
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  uint64_t covered = 0;
  for (size_t i = 0; i < extents.size(); ++i) {
    if (i > 0 && extents[i].begin < extents[i - 1].end) {
      return ModelFormatError(where + "tensors " + Quote(tensors_[extents[i - 1].tensor].name) + " and " +
                              Quote(tensors_[extents[i].tensor].name) + " overlap");
    }
    if (extents[i].begin != covered)
      return ModelFormatError(where + "bytes " + std::to_string(covered) + " to " + std::to_string(extents[i].begin) +
                              " of the data section belong to no tensor (a hole before " +
                              Quote(tensors_[extents[i].tensor].name) + ")");
    covered = extents[i].end;
  }
  if (covered != data_size)
    return ModelFormatError(where + "the data section has " + std::to_string(data_size - covered) +
                            " bytes after the last tensor");
  return Status::Ok();
}

std::unique_ptr<SafetensorsSet> SafetensorsSet::FromFile(std::unique_ptr<SafetensorsFile> file) {
  auto set = std::make_unique<SafetensorsSet>();
  for (const auto& t : file->tensors()) set->index_[t.name] = &t;
  set->files_.push_back(std::move(file));
  return set;
}

const SafetensorsTensor* SafetensorsSet::Find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : it->second;
}

std::vector<const SafetensorsTensor*> SafetensorsSet::All() const {
  std::vector<const SafetensorsTensor*> out;
  for (const auto& f : files_)
    for (const auto& t : f->tensors()) out.push_back(&t);
  return out;
}

StatusOr<std::unique_ptr<SafetensorsSet>> SafetensorsSet::OpenDir(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  std::error_code ec;
  if (!fs::exists(index_path, ec)) {
    const std::string single = (fs::path(dir) / "model.safetensors").string();
    if (!fs::exists(single, ec))
      return ModelFormatError(dir + " has neither model.safetensors nor model.safetensors.index.json");
    LLM_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open(single));
    return FromFile(std::move(f));
  }
  LLM_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(index_path));
  auto parsed = ParseJson(text, 64);
  if (!parsed.ok()) return ModelFormatError(index_path + ": " + parsed.status().message());
  const Json* map = parsed->Find("weight_map");
  if (map == nullptr || !map->is_object() || map->size() == 0)
    return ModelFormatError(index_path + ": no weight_map object");

  auto set = std::make_unique<SafetensorsSet>();
  std::unordered_map<std::string, SafetensorsFile*> shards;
  for (const auto& [name, shard] : map->object()) {
    if (!shard.is_string()) return ModelFormatError(index_path + ": weight_map entry " + Quote(name) + " is not a string");
    const std::string& s = shard.as_string();
    // A shard is a plain file name beside the index: no path may lead out
    // of the model directory.
    if (s.empty() || s.find('/') != std::string::npos || s.find('\\') != std::string::npos || s == "." ||
        s == ".." || !IsValidUtf8(s))
      return ModelFormatError(index_path + ": shard name " + Quote(s) + " is not a file name in the directory");
    if (!shards.count(s)) {
      LLM_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open((fs::path(dir) / s).string()));
      shards[s] = f.get();
      set->files_.push_back(std::move(f));
    }
    const SafetensorsTensor* t = shards[s]->Find(name);
    if (t == nullptr) return ModelFormatError(index_path + ": tensor " + Quote(name) + " is not in its shard " + s);
    if (set->index_.count(name)) return ModelFormatError(index_path + ": tensor " + Quote(name) + " is mapped twice");
    set->index_[name] = t;
  }
  // A tensor in some shard but mapped elsewhere (or not at all) would be
  // ambiguous: refused.
  for (const auto& f : set->files_) {
    for (const auto& t : f->tensors()) {
      auto it = set->index_.find(t.name);
      if (it == set->index_.end() || it->second != &t)
        return ModelFormatError(f->label() + ": tensor " + Quote(t.name) +
                                " is not mapped to this shard by model.safetensors.index.json");
    }
  }
  return set;
}

}  // namespace llm
