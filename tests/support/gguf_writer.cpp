#include "support/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <random>

#include "util/fp16.h"

namespace llm::test {

std::string EncodeString(std::string_view s) {
  return EncodePod<uint64_t>(s.size()) + std::string(s);
}

uint64_t TensorBytes(TensorType type, const std::vector<int64_t>& dims) {
  uint64_t n = 1;
  for (int64_t d : dims) n *= static_cast<uint64_t>(d);
  uint64_t be = 0, bb = 0;
  if (!TensorTypeBlock(type, &be, &bb)) return 0;
  return n / be * bb;
}

GgufWriter& GgufWriter::SetAlignment(uint32_t a, bool write_key) {
  alignment_ = a;
  if (write_key) AddUint32("general.alignment", a);
  return *this;
}

GgufWriter& GgufWriter::Kv(std::string_view key, GgufType type, std::string value) {
  return AddRawKv(key, static_cast<uint32_t>(type), std::move(value));
}

GgufWriter& GgufWriter::AddRawKv(std::string_view key, uint32_t type, std::string value) {
  kvs_.push_back(EncodeString(key) + EncodePod<uint32_t>(type) + value);
  return *this;
}

GgufWriter& GgufWriter::AddUint8(std::string_view k, uint8_t v) { return Kv(k, GgufType::kUint8, EncodePod(v)); }
GgufWriter& GgufWriter::AddInt8(std::string_view k, int8_t v) { return Kv(k, GgufType::kInt8, EncodePod(v)); }
GgufWriter& GgufWriter::AddUint16(std::string_view k, uint16_t v) { return Kv(k, GgufType::kUint16, EncodePod(v)); }
GgufWriter& GgufWriter::AddInt16(std::string_view k, int16_t v) { return Kv(k, GgufType::kInt16, EncodePod(v)); }
GgufWriter& GgufWriter::AddUint32(std::string_view k, uint32_t v) { return Kv(k, GgufType::kUint32, EncodePod(v)); }
GgufWriter& GgufWriter::AddInt32(std::string_view k, int32_t v) { return Kv(k, GgufType::kInt32, EncodePod(v)); }
GgufWriter& GgufWriter::AddUint64(std::string_view k, uint64_t v) { return Kv(k, GgufType::kUint64, EncodePod(v)); }
GgufWriter& GgufWriter::AddInt64(std::string_view k, int64_t v) { return Kv(k, GgufType::kInt64, EncodePod(v)); }
GgufWriter& GgufWriter::AddFloat32(std::string_view k, float v) { return Kv(k, GgufType::kFloat32, EncodePod(v)); }
GgufWriter& GgufWriter::AddFloat64(std::string_view k, double v) { return Kv(k, GgufType::kFloat64, EncodePod(v)); }
GgufWriter& GgufWriter::AddBool(std::string_view k, bool v) {
  return Kv(k, GgufType::kBool, EncodePod<uint8_t>(v ? 1 : 0));
}
GgufWriter& GgufWriter::AddString(std::string_view k, std::string_view v) {
  return Kv(k, GgufType::kString, EncodeString(v));
}

GgufWriter& GgufWriter::AddArray(std::string_view key, GgufType elem, uint64_t count,
                                 std::string elems) {
  return Kv(key, GgufType::kArray,
            EncodePod<uint32_t>(static_cast<uint32_t>(elem)) + EncodePod<uint64_t>(count) + elems);
}

GgufWriter& GgufWriter::AddStringArray(std::string_view key, const std::vector<std::string>& v) {
  std::string e;
  for (const std::string& s : v) e += EncodeString(s);
  return AddArray(key, GgufType::kString, v.size(), std::move(e));
}

GgufWriter& GgufWriter::AddFloatArray(std::string_view key, const std::vector<float>& v) {
  std::string e(v.size() * sizeof(float), '\0');
  if (!v.empty()) std::memcpy(e.data(), v.data(), e.size());
  return AddArray(key, GgufType::kFloat32, v.size(), std::move(e));
}

GgufWriter& GgufWriter::AddInt32Array(std::string_view key, const std::vector<int32_t>& v) {
  std::string e(v.size() * sizeof(int32_t), '\0');
  if (!v.empty()) std::memcpy(e.data(), v.data(), e.size());
  return AddArray(key, GgufType::kInt32, v.size(), std::move(e));
}

GgufWriter& GgufWriter::AddTensor(std::string_view name, TensorType type,
                                  std::vector<int64_t> dims, std::string data) {
  if (data.empty()) data.assign(TensorBytes(type, dims), '\0');
  std::vector<uint64_t> udims(dims.begin(), dims.end());
  return AddTensorRaw(name, static_cast<uint32_t>(type), std::move(udims), std::move(data));
}

GgufWriter& GgufWriter::AddTensorRaw(std::string_view name, uint32_t type,
                                     std::vector<uint64_t> dims, std::string data,
                                     std::optional<uint64_t> offset) {
  tensors_.push_back(Tensor{std::string(name), type, std::move(dims), std::move(data), offset});
  return *this;
}

GgufWriter& GgufWriter::SetCounts(std::optional<uint64_t> n_tensors, std::optional<uint64_t> n_kv) {
  n_tensors_override_ = n_tensors;
  n_kv_override_ = n_kv;
  return *this;
}

std::string GgufWriter::Serialize() const {
  // A hostile alignment value (0, not a power of two, huge) is only written
  // into the key; the layout then uses the default 32.
  const bool sane = alignment_ != 0 && (alignment_ & (alignment_ - 1)) == 0 && alignment_ <= 65536;
  const uint64_t align = sane ? alignment_ : 32;
  auto pad = [&](std::string& s) {
    while (s.size() % align != 0) s.push_back('\0');
  };
  std::string out = "GGUF";
  out += EncodePod<uint32_t>(version_);
  out += EncodePod<uint64_t>(n_tensors_override_.value_or(tensors_.size()));
  out += EncodePod<uint64_t>(n_kv_override_.value_or(kvs_.size()));
  for (const std::string& kv : kvs_) out += kv;

  std::string data;
  for (const Tensor& t : tensors_) {
    pad(data);
    out += EncodeString(t.name);
    out += EncodePod<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) out += EncodePod<uint64_t>(d);
    out += EncodePod<uint32_t>(t.type);
    out += EncodePod<uint64_t>(t.offset.value_or(data.size()));
    data += t.data;
  }
  if (!tensors_.empty()) {
    pad(out);
    out += data;
  }
  return out;
}

Status GgufWriter::WriteTo(const std::string& path) const {
  std::string bytes = Serialize();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return IoError("cannot create " + path);
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = (std::fclose(f) == 0) && ok;
  return ok ? Status::Ok() : IoError("cannot write " + path);
}

// ------------------------------------------------------------- tiny llama

namespace {

std::string RandomTensor(TensorType type, int64_t rows, int64_t cols, float scale,
                         std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::string out;
  auto put = [&](auto v) { out += EncodePod(v); };
  for (int64_t r = 0; r < rows; ++r) {
    if (type == TensorType::Q8_0) {
      for (int64_t b = 0; b < cols / kQ8_0BlockSize; ++b) {
        put(F32ToF16(scale / 127.0f));
        for (int i = 0; i < kQ8_0BlockSize; ++i) {
          put(static_cast<int8_t>(std::uniform_int_distribution<int>(-127, 127)(rng)));
        }
      }
      continue;
    }
    if (IsIQLattice(type)) {  // an F16 d, then random indices, signs and scales
      int64_t be = 0, bb = 0;
      TensorTypeLayout(type, &be, &bb);
      const uint16_t d = F32ToF16(scale / 64.0f);
      for (int64_t b = 0; b < cols / be; ++b) {
        const bool iq1m = type == TensorType::IQ1_M;
        std::string blk(static_cast<size_t>(bb), '\0');
        if (!iq1m) std::memcpy(blk.data(), &d, 2);
        for (int64_t i = iq1m ? 0 : 2; i < bb; ++i) blk[static_cast<size_t>(i)] = static_cast<char>(rng());
        if (iq1m) {  // d in the top nibbles of its 4 u16 scales (bytes 49, 51, 53, 55)
          for (int i = 0; i < 4; ++i)
            blk[49 + 2 * i] = static_cast<char>((blk[49 + 2 * i] & 0x0F) | ((d >> (4 * i)) & 0xF) << 4);
        }
        out += blk;
      }
      continue;
    }
    if (type == TensorType::Q4_0 || type == TensorType::Q4_1) {
      for (int64_t b = 0; b < cols / 32; ++b) {
        put(F32ToF16(scale / 8.0f));
        if (type == TensorType::Q4_1) put(F32ToF16(-scale));
        for (int i = 0; i < 16; ++i) put(static_cast<uint8_t>(rng()));
      }
      continue;
    }
    for (int64_t c = 0; c < cols; ++c) {
      float v = u(rng);
      if (type == TensorType::F16) put(F32ToF16(v));
      else if (type == TensorType::BF16) put(F32ToBf16(v));
      else put(v);
    }
  }
  return out;
}

}  // namespace

GgufWriter MakeTinyLlama(const TinyLlamaOptions& o) {
  std::mt19937 rng(o.seed);
  const int head_dim = o.n_embd / o.n_head;
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddString("general.name", "tiny-random-llama");
  w.AddUint32("llama.context_length", o.n_ctx);
  w.AddUint32("llama.embedding_length", o.n_embd);
  w.AddUint32("llama.block_count", o.n_layer);
  w.AddUint32("llama.feed_forward_length", o.n_ff);
  w.AddUint32("llama.rope.dimension_count", head_dim);
  w.AddUint32("llama.attention.head_count", o.n_head);
  w.AddUint32("llama.attention.head_count_kv", o.n_head_kv);
  w.AddFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.AddFloat32("llama.rope.freq_base", 10000.0f);

  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
  }
  for (int i = 0; static_cast<int>(tokens.size()) < o.n_vocab; ++i) {
    std::string piece = "\xe2\x96\x81";  // U+2581, the SentencePiece space
    for (int k = i; ; k = k / 26 - 1) {
      piece += static_cast<char>('a' + k % 26);
      if (k < 26) break;
    }
    tokens.push_back(piece);
    types.push_back(1);
  }
  tokens.resize(o.n_vocab);
  types.resize(o.n_vocab);
  std::vector<float> scores(o.n_vocab);
  for (int i = 0; i < o.n_vocab; ++i) scores[i] = types[i] == 1 ? -static_cast<float>(i) : 0.0f;
  w.AddString("tokenizer.ggml.model", "llama");
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddFloatArray("tokenizer.ggml.scores", scores);
  w.AddInt32Array("tokenizer.ggml.token_type", types);
  w.AddUint32("tokenizer.ggml.bos_token_id", 1);
  w.AddUint32("tokenizer.ggml.eos_token_id", 2);
  w.AddUint32("tokenizer.ggml.unknown_token_id", 0);

  const int64_t E = o.n_embd, Q = o.n_head * head_dim, KV = o.n_head_kv * head_dim, F = o.n_ff;
  const TensorType M = o.matrix_type;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    w.AddTensor(name, M, {cols, rows}, RandomTensor(M, rows, cols, 0.5f, rng));
  };
  auto norm = [&](const std::string& name) {
    std::string d;
    for (int64_t i = 0; i < E; ++i) d += EncodePod(1.0f + 0.1f * (std::generate_canonical<float, 24>(rng) - 0.5f));
    w.AddTensor(name, TensorType::F32, {E}, d);
  };
  matrix("token_embd.weight", o.n_vocab, E);
  for (int l = 0; l < o.n_layer; ++l) {
    std::string p = "blk." + std::to_string(l) + ".";
    norm(p + "attn_norm.weight");
    matrix(p + "attn_q.weight", Q, E);
    matrix(p + "attn_k.weight", KV, E);
    matrix(p + "attn_v.weight", KV, E);
    matrix(p + "attn_output.weight", E, Q);
    norm(p + "ffn_norm.weight");
    matrix(p + "ffn_gate.weight", F, E);
    matrix(p + "ffn_up.weight", F, E);
    matrix(p + "ffn_down.weight", E, F);
  }
  norm("output_norm.weight");
  if (!o.tied) matrix("output.weight", o.n_vocab, E);
  return w;
}

}  // namespace llm::test
