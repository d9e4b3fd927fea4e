// GGUF reader, model config and weight loading: real files (checked against
// the `gguf` Python package, see tests/data/make_gguf_oracle.py) and hostile
// files crafted with tests/support/gguf_writer.h.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "model/config.h"
#include "model/gguf.h"
#include "model/weights.h"
#include "support/gguf_writer.h"
#include "support/test_paths.h"

namespace llm {
namespace {

using test::EncodePod;
using test::EncodeString;
using test::GgufWriter;

std::string ModelPath(const char* name) { return test::RepoDir() + "/models/" + name; }

// FromMemory does not copy: `bytes` must outlive the result (hence no
// rvalue overload).
StatusOr<std::unique_ptr<GgufFile>> Parse(const std::string& bytes) {
  return GgufFile::FromMemory(bytes.data(), bytes.size());
}
StatusOr<std::unique_ptr<GgufFile>> Parse(std::string&&) = delete;

// The status of parsing bytes that need not outlive the call.
Status ParseStatus(const std::string& bytes) { return Parse(bytes).status(); }
llm_status CodeOf(const std::string& bytes) { return ParseStatus(bytes).code(); }

// A small valid file with one of each kind of thing, used as the base of the
// hostile variants.
GgufWriter SmallWriter() {
  GgufWriter w;
  w.AddString("general.architecture", "test");
  w.AddUint32("n", 7);
  w.AddStringArray("words", {"a", "bc", ""});
  w.AddFloatArray("floats", {1.5f, -2.0f});
  w.AddTensor("a", TensorType::F32, {4, 2});
  w.AddTensor("b", TensorType::F16, {3});
  return w;
}

// ------------------------------------------------------------ real files

uint64_t Fnv(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string Hex64(uint64_t v) {
  char b[20];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// The encoded bytes of an array's elements, rebuilt through the public API.
std::string EncodedArray(const GgufFile& f, std::string_view key) {
  GgufType et = *f.ArrayElemType(key);
  std::string enc;
  if (et == GgufType::kString) {
    auto v = f.GetStringArray(key);
    for (std::string_view s : v.value()) enc += EncodeString(s);
  } else if (et == GgufType::kFloat32) {
    auto a = f.GetFloatArray(key);
    for (float v : a.value()) enc += EncodePod(v);
  } else {
    auto a = f.GetIntArray(key);
    for (int64_t v : a.value()) {
      switch (et) {
        case GgufType::kUint8: case GgufType::kInt8: case GgufType::kBool: enc += EncodePod(static_cast<uint8_t>(v)); break;
        case GgufType::kUint16: case GgufType::kInt16: enc += EncodePod(static_cast<uint16_t>(v)); break;
        case GgufType::kUint32: case GgufType::kInt32: enc += EncodePod(static_cast<uint32_t>(v)); break;
        default: enc += EncodePod(static_cast<uint64_t>(v)); break;
      }
    }
  }
  return enc;
}

// Checks one file against its block of the oracle; returns the count of
// lines checked.
void CheckAgainstOracle(const std::string& path, const std::vector<std::string>& lines) {
  SCOPED_TRACE(path);
  auto r = GgufFile::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const GgufFile& f = *r.value();
  size_t n_kv = 0, n_tensors = 0;
  for (const std::string& line : lines) {
    std::istringstream in(line);
    std::string what;
    in >> what;
    if (what == "header") {
      uint32_t v;
      size_t nt, nk;
      in >> v >> nt >> nk;
      EXPECT_EQ(f.version(), v);
      EXPECT_EQ(f.tensors().size(), nt);
      EXPECT_EQ(f.keys().size(), nk);
    } else if (what == "kv") {
      ++n_kv;
      std::string key, type;
      in >> key >> type;
      SCOPED_TRACE(key);
      ASSERT_TRUE(f.Has(key));
      ASSERT_TRUE(f.KeyType(key).has_value());
      EXPECT_EQ(GgufTypeName(*f.KeyType(key)), type);
      if (type == "string") {
        size_t len;
        std::string hash;
        in >> len >> hash;
        std::string_view s = f.GetString(key).value();
        EXPECT_EQ(s.size(), len);
        EXPECT_EQ(Hex64(Fnv(s)), hash);
      } else if (type == "array") {
        std::string et, hash;
        uint64_t count;
        in >> et >> count >> hash;
        EXPECT_EQ(GgufTypeName(*f.ArrayElemType(key)), et);
        EXPECT_EQ(*f.ArrayLength(key), count);
        EXPECT_EQ(Hex64(Fnv(EncodedArray(f, key))), hash);
      } else if (type == "float32" || type == "float64") {
        double v;
        in >> v;
        EXPECT_EQ(f.GetFloat(key).value(), v);
      } else if (type == "bool") {
        int v;
        in >> v;
        EXPECT_EQ(f.GetBool(key).value(), v != 0);
      } else {
        int64_t v;
        in >> v;
        EXPECT_EQ(f.GetInt(key).value(), v);
      }
    } else if (what == "tensor") {
      ++n_tensors;
      std::string name, dims;
      uint32_t type;
      uint64_t offset, nbytes;
      in >> name >> type >> dims >> offset >> nbytes;
      SCOPED_TRACE(name);
      const GgufTensorInfo* t = f.FindTensor(name);
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(static_cast<uint32_t>(t->type), type);
      std::string got;
      for (size_t i = 0; i < t->dims.size(); ++i) {
        if (i) got += ',';
        got += std::to_string(t->dims[i]);
      }
      EXPECT_EQ(got, dims);
      EXPECT_EQ(t->offset, offset);
      EXPECT_EQ(t->nbytes, nbytes);
      EXPECT_EQ(t->data, static_cast<const uint8_t*>(f.data()) + offset);
    }
  }
  EXPECT_EQ(n_kv, f.keys().size());
  EXPECT_EQ(n_tensors, f.tensors().size());
}

// Oracle blocks keyed by (root, relative path).
std::vector<std::pair<std::string, std::vector<std::string>>> LoadOracle() {
  std::ifstream in(test::RepoDir() + "/tests/data/gguf_oracle.txt");
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("file ", 0) == 0) {
      out.emplace_back(line.substr(5), std::vector<std::string>{});
    } else if (!out.empty()) {
      out.back().second.push_back(line);
    }
  }
  return out;
}

// The oracle lists the bundled models (models/) and vocabularies
// (tests/data/tokenizer-tests/), all by their path below the repository root.
int CheckOracleFilesUnder(const std::string& folder) {
  int checked = 0;
  for (auto& [where, lines] : LoadOracle()) {
    if (where.rfind("repo " + folder, 0) != 0) continue;
    CheckAgainstOracle(test::RepoDir() + "/" + where.substr(5), lines);
    ++checked;
  }
  return checked;
}

TEST(GgufOracle, BundledModelsMatchPythonReader) {
  ASSERT_FALSE(LoadOracle().empty()) << "tests/data/gguf_oracle.txt missing";
  EXPECT_EQ(CheckOracleFilesUnder("models/"), 2);
}

TEST(GgufOracle, BundledVocabulariesMatchPythonReader) {
  EXPECT_GE(CheckOracleFilesUnder("tests/data/tokenizer-tests/"), 14);
}

TEST(GgufReal, EveryBundledVocabularyOpens) {
  const std::string dir = test::DataDir() + "/tokenizer-tests";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir << " missing";
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".gguf") continue;
    SCOPED_TRACE(e.path().string());
    auto f = GgufFile::Open(e.path().string());
    ASSERT_TRUE(f.ok()) << f.status().message();
    EXPECT_TRUE(f.value()->Has("tokenizer.ggml.tokens"));
    EXPECT_GT(f.value()->GetStringArray("tokenizer.ggml.tokens")->size(), 1000u);
    ++n;
  }
  EXPECT_GE(n, 14);
}

TEST(GgufReal, V1FileIsUnsupported) {
  auto f = GgufFile::Open(test::DataDir() + "/stories260K/tinyllamas-stories-260k-f32.gguf");
  EXPECT_EQ(f.status().code(), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(f.status().message().find("version 1"), std::string::npos);
}

TEST(GgufReal, ConfigAndWeightsOfBothModels) {
  for (const char* name : {"stories260K-f32.gguf", "stories260K-f16.gguf"}) {
    SCOPED_TRACE(name);
    auto f = GgufFile::Open(ModelPath(name));
    ASSERT_TRUE(f.ok()) << f.status().message();
    auto c = ModelConfig::FromGguf(*f.value());
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->arch, "llama");
    EXPECT_EQ(c->name, "tinyllamas-stories-260k");
    EXPECT_EQ(c->n_vocab, 512);
    EXPECT_EQ(c->n_ctx_train, 512);
    EXPECT_EQ(c->n_embd, 64);
    EXPECT_EQ(c->n_layer, 5);
    EXPECT_EQ(c->n_head, 8);
    EXPECT_EQ(c->n_head_kv, 4);
    EXPECT_EQ(c->head_dim, 8);
    EXPECT_EQ(c->n_ff, 172);
    EXPECT_EQ(c->rope_dim, 8);
    EXPECT_EQ(c->rope_theta, 10000.0f);
    EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
    EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kNone);
    EXPECT_FALSE(c->tied_embeddings);  // output.weight is stored (equal to token_embd)
    EXPECT_FALSE(c->has_rope_freqs);
    auto w = ModelWeights::FromGguf(*f.value(), c.value());
    ASSERT_TRUE(w.ok()) << w.status().message();
    EXPECT_EQ(w->n_params, 260032 + 512 * 64);
    ASSERT_EQ(w->layers.size(), 5u);
    bool f16 = std::string(name).find("f16") != std::string::npos;
    TensorType mt = f16 ? TensorType::F16 : TensorType::F32;
    EXPECT_EQ(w->token_embd.type, mt);
    EXPECT_EQ(w->token_embd.rows, 512);
    EXPECT_EQ(w->token_embd.cols, 64);
    EXPECT_EQ(w->token_embd.row_bytes, f16 ? 128u : 256u);
    EXPECT_EQ(w->layers[4].w_down.rows, 64);
    EXPECT_EQ(w->layers[4].w_down.cols, 172);
    EXPECT_EQ(w->layers[0].wk.rows, 32);
    EXPECT_EQ(w->layers[0].attn_norm.type, TensorType::F32);
    EXPECT_EQ(w->output.data, f.value()->FindTensor("output.weight")->data);
    EXPECT_TRUE(w->rope_freqs.empty());
  }
}

TEST(GgufReal, FromMemoryMatchesOpen) {
  std::string bytes = test::ReadFile(ModelPath("stories260K-f16.gguf"));
  ASSERT_FALSE(bytes.empty());
  auto m = Parse(bytes);
  auto o = GgufFile::Open(ModelPath("stories260K-f16.gguf"));
  ASSERT_TRUE(m.ok() && o.ok());
  ASSERT_EQ(m.value()->tensors().size(), o.value()->tensors().size());
  for (size_t i = 0; i < o.value()->tensors().size(); ++i) {
    const auto& a = m.value()->tensors()[i];
    const auto& b = o.value()->tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.offset, b.offset);
    EXPECT_EQ(a.data, bytes.data() + a.offset);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0);
  }
  EXPECT_EQ(m.value()->keys(), o.value()->keys());
}

// ------------------------------------------------------ metadata access

TEST(GgufMetadata, EveryTypeRoundTrips) {
  GgufWriter w;
  w.AddUint8("u8", 200).AddInt8("i8", -100).AddUint16("u16", 60000).AddInt16("i16", -30000);
  w.AddUint32("u32", 4000000000u).AddInt32("i32", -2000000000).AddUint64("u64", 1ull << 40);
  w.AddInt64("i64", -(1ll << 50)).AddFloat32("f32", 0.25f).AddFloat64("f64", 1e300);
  w.AddBool("t", true).AddBool("f", false).AddString("s", "hello\0world");
  w.AddString("s2", std::string("a\0b", 3)).AddUint64("huge", ~0ull);
  w.AddInt32Array("ints", {1, -2, 3}).AddFloatArray("fl", {0.5f}).AddStringArray("strs", {"x", "yz"});
  w.AddArray("empty", GgufType::kString, 0, "");
  w.AddArray("u64s", GgufType::kUint64, 2, EncodePod<uint64_t>(5) + EncodePod<uint64_t>(~0ull));
  w.AddArray("f64s", GgufType::kFloat64, 1, EncodePod<double>(2.5));
  std::string bytes = w.Serialize();
  auto r = Parse(bytes);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const GgufFile& f = *r.value();
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.GetInt("u8").value(), 200);
  EXPECT_EQ(f.GetInt("i8").value(), -100);
  EXPECT_EQ(f.GetInt("u16").value(), 60000);
  EXPECT_EQ(f.GetInt("i16").value(), -30000);
  EXPECT_EQ(f.GetInt("u32").value(), 4000000000ll);
  EXPECT_EQ(f.GetInt("i32").value(), -2000000000);
  EXPECT_EQ(f.GetInt("u64").value(), 1ll << 40);
  EXPECT_EQ(f.GetInt("i64").value(), -(1ll << 50));
  EXPECT_EQ(f.GetFloat("f32").value(), 0.25);
  EXPECT_EQ(f.GetFloat("f64").value(), 1e300);
  EXPECT_EQ(f.GetFloat("i32").value(), -2000000000.0);  // integers accepted
  EXPECT_TRUE(f.GetBool("t").value());
  EXPECT_FALSE(f.GetBool("f").value());
  EXPECT_EQ(f.GetString("s").value(), "hello");
  EXPECT_EQ(f.GetString("s2").value(), std::string_view("a\0b", 3));
  EXPECT_EQ(f.GetIntArray("ints").value(), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(f.GetFloatArray("ints").value(), (std::vector<float>{1, -2, 3}));
  EXPECT_EQ(f.GetFloatArray("fl").value(), std::vector<float>{0.5f});
  EXPECT_EQ(f.GetFloatArray("f64s").value(), std::vector<float>{2.5f});
  EXPECT_EQ(f.GetStringArray("strs").value(), (std::vector<std::string_view>{"x", "yz"}));
  EXPECT_TRUE(f.GetStringArray("empty")->empty());
  EXPECT_EQ(*f.ArrayLength("strs"), 2u);
  EXPECT_EQ(*f.ArrayElemType("ints"), GgufType::kInt32);
  EXPECT_EQ(f.KeyType("t"), GgufType::kBool);
  EXPECT_FALSE(f.KeyType("nope").has_value());
  EXPECT_EQ(f.keys().size(), 21u);
  EXPECT_EQ(f.keys()[0], "u8");
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.FindTensor("x"), nullptr);
  // Errors.
  EXPECT_FALSE(f.Has("nope"));
  EXPECT_EQ(f.GetInt("nope").status().code(), LLM_ERR_NOT_FOUND);
  EXPECT_NE(f.GetInt("nope").status().message().find("nope"), std::string::npos);
  EXPECT_EQ(f.GetInt("f32").status().code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(f.GetInt("huge").status().code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(f.GetString("u8").status().code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(f.GetBool("u8").status().code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(f.GetFloat("s").status().code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(f.GetStringArray("ints").status().code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(f.GetIntArray("strs").status().code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(f.GetIntArray("fl").status().code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(f.GetIntArray("u64s").status().code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(f.GetFloatArray("s").status().code(), LLM_ERR_MODEL_FORMAT);
}

TEST(GgufMetadata, BoolByteOtherThanZeroOrOneIsAnError) {
  GgufWriter w;
  w.AddRawKv("b", static_cast<uint32_t>(GgufType::kBool), EncodePod<uint8_t>(2));
  std::string r_bytes = w.Serialize();
  auto r = Parse(r_bytes);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value()->GetBool("b").status().code(), LLM_ERR_MODEL_FORMAT);
}

TEST(GgufMetadata, Version2Accepted) {
  std::string bytes = SmallWriter().SetVersion(2).Serialize();
  auto r = Parse(bytes);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()->version(), 2u);
}

TEST(GgufMetadata, LargeTokenArrayIsFast) {
  std::vector<std::string> toks(200000);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = "tok" + std::to_string(i);
  GgufWriter w;
  w.AddStringArray("tokenizer.ggml.tokens", toks);
  w.AddFloatArray("tokenizer.ggml.scores", std::vector<float>(toks.size(), 1.0f));
  std::string bytes = w.Serialize();
  auto t0 = std::chrono::steady_clock::now();
  auto r = Parse(bytes);
  ASSERT_TRUE(r.ok());
  auto arr = r.value()->GetStringArray("tokenizer.ggml.tokens");
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(arr.ok());
  EXPECT_EQ((*arr)[123456], "tok123456");
  EXPECT_LT(ms, 500.0);  // a few ms in practice; generous for sanitizer builds
}

TEST(GgufTensors, LayoutAndCustomAlignment) {
  GgufWriter w;
  w.SetAlignment(64);
  w.AddTensor("q", TensorType::Q8_0, {64, 3});
  w.AddTensor("q4", TensorType::Q4_0, {32});
  w.AddTensor("q41", TensorType::Q4_1, {32, 2});
  w.AddTensor("bf", TensorType::BF16, {5, 1, 1, 2});
  std::string bytes = w.Serialize();
  auto r = Parse(bytes);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const GgufFile& f = *r.value();
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.FindTensor("q")->nbytes, 2u * 3 * 34);
  EXPECT_EQ(f.FindTensor("q4")->nbytes, 18u);
  EXPECT_EQ(f.FindTensor("q41")->nbytes, 40u);
  EXPECT_EQ(f.FindTensor("bf")->nbytes, 20u);
  EXPECT_EQ(f.FindTensor("bf")->n_elements(), 10);
  for (const auto& t : f.tensors()) EXPECT_EQ(t.offset % 64, 0u) << t.name;
}

// -------------------------------------------------------- hostile files

TEST(GgufHostile, MissingFileIsIo) {
  auto r = GgufFile::Open(test::RepoDir() + "/models/does-not-exist.gguf");
  EXPECT_EQ(r.status().code(), LLM_ERR_IO);
  EXPECT_NE(r.status().message().find("does-not-exist"), std::string::npos);
}

TEST(GgufHostile, DirectoryIsIo) {
  EXPECT_EQ(GgufFile::Open(test::RepoDir() + "/models").status().code(), LLM_ERR_IO);
}

TEST(GgufHostile, EmptyFile) {
  std::string path = testing::TempDir() + "/llmrt_empty.gguf";
  { std::ofstream(path, std::ios::binary); }
  EXPECT_EQ(GgufFile::Open(path).status().code(), LLM_ERR_MODEL_FORMAT);
  std::remove(path.c_str());
  EXPECT_EQ(GgufFile::FromMemory(nullptr, 0).status().code(), LLM_ERR_MODEL_FORMAT);
}

TEST(GgufHostile, WriteToAndOpen) {
  std::string path = testing::TempDir() + "/llmrt_small.gguf";
  ASSERT_TRUE(SmallWriter().WriteTo(path).ok());
  auto r = GgufFile::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()->GetStringArray("words")->size(), 3u);
  std::remove(path.c_str());
}

TEST(GgufHostile, BadMagic) {
  std::string b = SmallWriter().Serialize();
  b[0] = 'X';
  EXPECT_EQ(CodeOf(b), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(CodeOf("GGML\x03\0\0\0"), LLM_ERR_MODEL_FORMAT);
}

TEST(GgufHostile, UnsupportedVersions) {
  EXPECT_EQ(CodeOf(SmallWriter().SetVersion(1).Serialize()), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(CodeOf(SmallWriter().SetVersion(4).Serialize()), LLM_ERR_UNSUPPORTED);
  Status bes = ParseStatus(SmallWriter().SetVersion(0x03000000).Serialize());
  EXPECT_EQ(bes.code(), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(bes.message().find("big-endian"), std::string::npos);
}

TEST(GgufHostile, EveryPrefixOfSmallFileFails) {
  std::string b = SmallWriter().Serialize();
  ASSERT_TRUE(Parse(b).ok());
  for (size_t n = 0; n < b.size(); ++n) {
    // A copy of exactly n bytes, so ASan sees any read past the end.
    std::vector<char> prefix(b.begin(), b.begin() + n);
    auto r = GgufFile::FromMemory(n ? prefix.data() : nullptr, n);
    EXPECT_FALSE(r.ok()) << "prefix " << n;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), LLM_ERR_MODEL_FORMAT) << "prefix " << n;
    }
  }
}

TEST(GgufHostile, PrefixesOfRealModelFail) {
  std::string b = test::ReadFile(ModelPath("stories260K-f16.gguf"));
  ASSERT_FALSE(b.empty());
  auto full = Parse(b);
  ASSERT_TRUE(full.ok());
  uint64_t header = full.value()->data_offset();
  std::vector<size_t> sizes;
  for (size_t n = 0; n < header; ++n) sizes.push_back(n);            // every header prefix
  for (size_t n = header; n < b.size(); n += 997) sizes.push_back(n);  // into the data
  sizes.push_back(b.size() - 1);
  for (size_t n : sizes) {
    std::vector<char> prefix(b.begin(), b.begin() + n);
    auto r = GgufFile::FromMemory(n ? prefix.data() : nullptr, n);
    ASSERT_FALSE(r.ok()) << "prefix " << n;
    ASSERT_EQ(r.status().code(), LLM_ERR_MODEL_FORMAT) << "prefix " << n;
  }
}

TEST(GgufHostile, TensorPastEof) {
  GgufWriter w;
  w.AddTensorRaw("t", 0, {16}, std::string(32, '\0'));  // needs 64 bytes, has 32
  Status rs = ParseStatus(w.Serialize());
  EXPECT_EQ(rs.code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_NE(rs.message().find("'t'"), std::string::npos);
  GgufWriter w2;
  w2.AddTensorRaw("t", 0, {4}, std::string(16, '\0'), uint64_t{1} << 63);
  EXPECT_EQ(CodeOf(w2.Serialize()), LLM_ERR_MODEL_FORMAT);
  GgufWriter w3;
  w3.AddTensorRaw("t", 0, {4}, std::string(16, '\0'), ~uint64_t{0} - 31);  // aligned, wraps
  EXPECT_EQ(CodeOf(w3.Serialize()), LLM_ERR_MODEL_FORMAT);
}

TEST(GgufHostile, UnknownTensorType) {
  for (uint32_t type : {31u, 36u, 1000u, 0xffffffffu}) {  // 31, 36: removed ggml types, not read
    GgufWriter w;
    w.AddTensorRaw("weird", type, {32}, std::string(1024, '\0'));
    Status rs = ParseStatus(w.Serialize());
    EXPECT_EQ(rs.code(), LLM_ERR_UNSUPPORTED);
    EXPECT_NE(rs.message().find(std::to_string(type)), std::string::npos);
    EXPECT_NE(rs.message().find("weird"), std::string::npos);
  }
}

TEST(GgufHostile, AbsurdCounts) {
  for (uint64_t n : {uint64_t{1} << 40, ~uint64_t{0}, uint64_t{1000}}) {
    EXPECT_EQ(CodeOf(SmallWriter().SetCounts(n, std::nullopt).Serialize()), LLM_ERR_MODEL_FORMAT);
    EXPECT_EQ(CodeOf(SmallWriter().SetCounts(std::nullopt, n).Serialize()), LLM_ERR_MODEL_FORMAT);
  }
  // Each count alone fits, together they do not.
  std::string b = SmallWriter().Serialize();
  EXPECT_EQ(CodeOf(SmallWriter().SetCounts(b.size() / 40, b.size() / 16).Serialize()),
            LLM_ERR_MODEL_FORMAT);
}

TEST(GgufHostile, StringLengthPastEof) {
  GgufWriter w;
  w.AddRawKv("s", static_cast<uint32_t>(GgufType::kString), EncodePod<uint64_t>(1000) + "abc");
  EXPECT_EQ(CodeOf(w.Serialize()), LLM_ERR_MODEL_FORMAT);
  GgufWriter w2;
  w2.AddRawKv("s", static_cast<uint32_t>(GgufType::kString), EncodePod<uint64_t>(~0ull) + "abc");
  EXPECT_EQ(CodeOf(w2.Serialize()), LLM_ERR_MODEL_FORMAT);
  // Key length past EOF, and a huge key length.
  std::string b = SmallWriter().Serialize();
  std::string k = b.substr(0, 24) + EncodePod<uint64_t>(1ull << 62) + "xx";
  EXPECT_EQ(CodeOf(k), LLM_ERR_MODEL_FORMAT);
  // A string inside an array.
  GgufWriter w3;
  w3.AddArray("a", GgufType::kString, 2, EncodeString("ok") + EncodePod<uint64_t>(99) + "no");
  EXPECT_EQ(CodeOf(w3.Serialize()), LLM_ERR_MODEL_FORMAT);
}

TEST(GgufHostile, ArrayCountOverflow) {
  for (uint64_t count : {uint64_t{1} << 62, ~uint64_t{0}, uint64_t{1} << 61, uint64_t{100}}) {
    GgufWriter w;
    w.AddArray("a", GgufType::kUint32, count, EncodePod<uint32_t>(1));
    EXPECT_EQ(CodeOf(w.Serialize()), LLM_ERR_MODEL_FORMAT) << count;
    GgufWriter w2;
    w2.AddArray("a", GgufType::kString, count, EncodeString("x"));
    EXPECT_EQ(CodeOf(w2.Serialize()), LLM_ERR_MODEL_FORMAT) << count;
  }
  GgufWriter w;
  w.AddArray("a", static_cast<GgufType>(13), 1, EncodePod<uint32_t>(1));
  EXPECT_EQ(CodeOf(w.Serialize()), LLM_ERR_MODEL_FORMAT);
}

TEST(GgufHostile, NestedArrays) {
  auto inner = [](uint64_t n) {
    return EncodePod<uint32_t>(static_cast<uint32_t>(GgufType::kInt32)) + EncodePod<uint64_t>(n) +
           std::string(4 * n, '\1');
  };
  GgufWriter ok;
  ok.AddArray("a", GgufType::kArray, 2, inner(1) + inner(3)).AddUint8("after", 5);
  std::string r_bytes = ok.Serialize();
  auto r = Parse(r_bytes);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()->GetInt("after").value(), 5);  // skipped correctly
  EXPECT_EQ(*r.value()->ArrayElemType("a"), GgufType::kArray);
  EXPECT_EQ(r.value()->GetIntArray("a").status().code(), LLM_ERR_MODEL_FORMAT);
  // An inner array that lies about its length.
  GgufWriter bad;
  bad.AddArray("a", GgufType::kArray, 2, inner(1) + EncodePod<uint32_t>(5) + EncodePod<uint64_t>(1ull << 60));
  EXPECT_EQ(CodeOf(bad.Serialize()), LLM_ERR_MODEL_FORMAT);
  // Arrays nested without bound are refused, however many bytes remain.
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += EncodePod<uint32_t>(9) + EncodePod<uint64_t>(1);
  deep += inner(0);
  GgufWriter d;
  d.AddRawKv("deep", 9, deep);
  Status drs = ParseStatus(d.Serialize());
  EXPECT_EQ(drs.code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_NE(drs.message().find("nested"), std::string::npos);
}

TEST(GgufHostile, UnknownValueType) {
  GgufWriter w;
  w.AddRawKv("x", 13, EncodePod<uint32_t>(0));
  EXPECT_EQ(CodeOf(w.Serialize()), LLM_ERR_MODEL_FORMAT);
}

TEST(GgufHostile, DimsProductOverflow) {
  GgufWriter w;
  w.AddTensorRaw("t", 0, {1ull << 32, 1ull << 32}, "");
  EXPECT_EQ(CodeOf(w.Serialize()), LLM_ERR_MODEL_FORMAT);
  GgufWriter w2;  // element count fits int64, byte count does not fit the file
  w2.AddTensorRaw("t", 0, {1ull << 31, 1ull << 31}, "");
  EXPECT_EQ(CodeOf(w2.Serialize()), LLM_ERR_MODEL_FORMAT);
  GgufWriter w3;
  w3.AddTensorRaw("t", 0, {~0ull}, "");
  EXPECT_EQ(CodeOf(w3.Serialize()), LLM_ERR_MODEL_FORMAT);
  GgufWriter w4;
  w4.AddTensorRaw("t", 0, {4, 0}, std::string(16, '\0'));
  EXPECT_EQ(CodeOf(w4.Serialize()), LLM_ERR_MODEL_FORMAT);
}

TEST(GgufHostile, DimensionCount) {
  GgufWriter w0;
  w0.AddTensorRaw("t", 0, {}, std::string(4, '\0'));
  EXPECT_EQ(CodeOf(w0.Serialize()), LLM_ERR_MODEL_FORMAT);
  GgufWriter w5;
  w5.AddTensorRaw("t", 0, {1, 1, 1, 1, 1}, std::string(4, '\0'));
  EXPECT_EQ(CodeOf(w5.Serialize()), LLM_ERR_MODEL_FORMAT);
}

TEST(GgufHostile, QuantizedRowNotWholeBlocks) {
  GgufWriter w;
  w.AddTensorRaw("q", static_cast<uint32_t>(TensorType::Q8_0), {48, 2}, std::string(1024, '\0'));
  EXPECT_EQ(CodeOf(w.Serialize()), LLM_ERR_MODEL_FORMAT);
}

TEST(GgufHostile, MisalignedTensorOffset) {
  GgufWriter w;
  w.AddTensorRaw("t", 0, {4}, std::string(64, '\0'), uint64_t{4});
  Status rs = ParseStatus(w.Serialize());
  EXPECT_EQ(rs.code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_NE(rs.message().find("align"), std::string::npos);
}

TEST(GgufHostile, DuplicateTensorName) {
  GgufWriter w;
  w.AddTensor("t", TensorType::F32, {4}).AddTensor("t", TensorType::F32, {4});
  Status rs = ParseStatus(w.Serialize());
  EXPECT_EQ(rs.code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_NE(rs.message().find("duplicate"), std::string::npos);
}

TEST(GgufHostile, DuplicateKey) {
  GgufWriter w;
  w.AddUint32("k", 1).AddUint32("k", 2);
  EXPECT_EQ(CodeOf(w.Serialize()), LLM_ERR_MODEL_FORMAT);
}

TEST(GgufHostile, EmptyOrLongNames) {
  GgufWriter w;
  w.AddUint32("", 1);
  EXPECT_EQ(CodeOf(w.Serialize()), LLM_ERR_MODEL_FORMAT);
  GgufWriter t;
  t.AddTensor("", TensorType::F32, {4});
  EXPECT_EQ(CodeOf(t.Serialize()), LLM_ERR_MODEL_FORMAT);
  GgufWriter l;
  l.AddTensor(std::string(65, 'n'), TensorType::F32, {4});
  EXPECT_EQ(CodeOf(l.Serialize()), LLM_ERR_MODEL_FORMAT);
}

TEST(GgufHostile, BadAlignment) {
  for (uint32_t a : {0u, 3u, 48u, 0xffffffffu}) {
    GgufWriter w;
    w.SetAlignment(a).AddTensor("t", TensorType::F32, {4});
    Status rs = ParseStatus(w.Serialize());
    EXPECT_EQ(rs.code(), LLM_ERR_MODEL_FORMAT) << a;
    EXPECT_NE(rs.message().find("general.alignment"), std::string::npos);
  }
  GgufWriter wt;  // right value, wrong type
  wt.AddUint64("general.alignment", 32).AddTensor("t", TensorType::F32, {4});
  EXPECT_EQ(CodeOf(wt.Serialize()), LLM_ERR_MODEL_FORMAT);
}

// Random bit flips, byte overwrites and length-field stomps over the header
// region of the real model: every result must be a clean success or error.
TEST(GgufHostile, RandomMutationsNeverCrash) {
  std::string orig = test::ReadFile(ModelPath("stories260K-f16.gguf"));
  ASSERT_FALSE(orig.empty());
  size_t header = Parse(orig).value()->data_offset();
  std::mt19937_64 rng(1234);
  int ok = 0, failed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string b = orig;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % header;
      switch (rng() % 3) {
        case 0: b[pos] ^= static_cast<char>(1u << (rng() % 8)); break;
        case 1: b[pos] = static_cast<char>(rng()); break;
        default: {  // a plausible-looking huge or small 64-bit field
          uint64_t v = (rng() % 2) ? rng() : rng() % 4096;
          if (pos + 8 <= b.size()) std::memcpy(&b[pos], &v, 8);
        }
      }
    }
    auto r = GgufFile::FromMemory(b.data(), b.size());
    if (!r.ok()) {
      ++failed;
      continue;
    }
    ++ok;
    const GgufFile& f = *r.value();
    for (std::string_view k : f.keys()) {  // every accessor on every key
      (void)f.GetString(k); (void)f.GetInt(k); (void)f.GetFloat(k); (void)f.GetBool(k);
      (void)f.GetStringArray(k); (void)f.GetFloatArray(k); (void)f.GetIntArray(k);
    }
    for (const auto& t : f.tensors()) {
      ASSERT_LE(t.offset + t.nbytes, b.size());
    }
    auto c = ModelConfig::FromGguf(f);
    if (c.ok()) (void)ModelWeights::FromGguf(f, c.value());
  }
  EXPECT_GT(failed, 0);
  EXPECT_GT(ok, 0);  // many flips land in values, not structure
}

// ------------------------------------------------------ config / weights

StatusOr<ModelConfig> ConfigOf(const GgufWriter& w, std::string* keep) {
  *keep = w.Serialize();
  auto f = Parse(*keep);
  if (!f.ok()) return f.status();
  return ModelConfig::FromGguf(*f.value());
}

TEST(ModelConfigGguf, TinyLlamaEveryMatrixType) {
  for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0}) {
    test::TinyLlamaOptions o;
    o.matrix_type = t;
    std::string bytes = test::MakeTinyLlama(o).Serialize();
    auto f = Parse(bytes);
    ASSERT_TRUE(f.ok()) << f.status().message();
    auto c = ModelConfig::FromGguf(*f.value());
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->n_vocab, 288);
    EXPECT_EQ(c->head_dim, 8);
    EXPECT_EQ(c->kv_dim(), 16);
    auto w = ModelWeights::FromGguf(*f.value(), c.value());
    ASSERT_TRUE(w.ok()) << w.status().message();
    EXPECT_EQ(w->layers[1].wq.type, t);
    EXPECT_EQ(w->layers[1].attn_norm.type, TensorType::F32);
    if (t == TensorType::Q8_0) {
      EXPECT_EQ(w->layers[0].w_down.row_bytes, 2u * 34);
    }
  }
}

TEST(ModelConfigGguf, TiedEmbeddings) {
  test::TinyLlamaOptions o;
  o.tied = true;
  std::string bytes = test::MakeTinyLlama(o).Serialize();
  auto f = Parse(bytes);
  auto c = ModelConfig::FromGguf(*f.value());
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->tied_embeddings);
  auto w = ModelWeights::FromGguf(*f.value(), c.value());
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->output.data, w->token_embd.data);
  EXPECT_EQ(w->output.rows, 288);
}

TEST(ModelConfigGguf, DefaultsAndOptionalKeys) {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("llama.context_length", 64).AddUint32("llama.embedding_length", 32);
  w.AddUint32("llama.block_count", 1).AddUint32("llama.feed_forward_length", 48);
  w.AddUint32("llama.attention.head_count", 4).AddUint32("llama.vocab_size", 100);
  w.AddString("llama.rope.scaling.type", "linear").AddFloat32("llama.rope.scaling.factor", 4);
  w.AddUint32("llama.rope.scaling.original_context_length", 16);
  w.AddTensor("rope_freqs.weight", TensorType::F32, {4});
  std::string keep;
  auto c = ConfigOf(w, &keep);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->n_head_kv, 4);
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->rope_dim, 8);
  EXPECT_EQ(c->rope_theta, 10000.0f);
  EXPECT_EQ(c->n_vocab, 100);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(c->rope_scaling.factor, 4.0f);
  EXPECT_EQ(c->rope_scaling.original_ctx, 16);
  EXPECT_TRUE(c->has_rope_freqs);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_TRUE(c->name.empty());
}

GgufWriter Gemma3Config() {
  GgufWriter w;
  w.AddString("general.architecture", "gemma3");
  w.AddUint32("gemma3.context_length", 64).AddUint32("gemma3.embedding_length", 32);
  w.AddUint32("gemma3.block_count", 7).AddUint32("gemma3.feed_forward_length", 48);
  w.AddUint32("gemma3.attention.head_count", 2).AddUint32("gemma3.attention.head_count_kv", 1);
  w.AddUint32("gemma3.attention.key_length", 32).AddUint32("gemma3.attention.value_length", 32);
  w.AddFloat32("gemma3.rope.freq_base", 1e6f).AddFloat32("gemma3.attention.layer_norm_rms_epsilon", 1e-6f);
  w.AddUint32("gemma3.vocab_size", 100);
  return w;
}

TEST(ModelConfigGguf, Gemma3) {
  std::string keep;
  GgufWriter w = Gemma3Config();
  w.AddUint32("gemma3.attention.sliding_window", 16);
  auto c = ConfigOf(w, &keep);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch_kind, ModelArch::kGemma3);
  EXPECT_EQ(c->head_dim, 32);  // key_length, not 32 / 2
  EXPECT_EQ(c->rope_style, RopeStyle::kNeox);
  EXPECT_EQ(c->ffn_act, FfnActivation::kGeluTanh);
  EXPECT_FLOAT_EQ(c->embd_scale, std::sqrt(32.0f));
  EXPECT_FLOAT_EQ(c->AttnScale(), 1.0f / std::sqrt(32.0f));
  EXPECT_TRUE(c->qk_norm && c->post_norms);
  EXPECT_EQ(c->sliding_window, 16);
  EXPECT_EQ(c->rope_theta, 1e6f);
  EXPECT_EQ(c->rope_theta_swa, 1e4f);
  EXPECT_EQ(c->final_logit_softcap, 0.0f);
  for (int l = 0; l < 7; ++l) EXPECT_EQ(c->IsLocalLayer(l), l != 5) << l;  // every 6th global

  // Optional keys: another period, the local base, a soft-cap.
  w = Gemma3Config();
  w.AddUint32("gemma3.attention.sliding_window", 16).AddUint32("gemma3.attention.sliding_window_pattern", 3);
  w.AddFloat32("gemma3.rope.freq_base_swa", 5e4f).AddFloat32("gemma3.final_logit_softcapping", 30.0f);
  c = ConfigOf(w, &keep);
  ASSERT_TRUE(c.ok()) << c.status().message();
  for (int l = 0; l < 7; ++l) EXPECT_EQ(c->IsLocalLayer(l), l % 3 != 2) << l;
  EXPECT_EQ(c->rope_theta_swa, 5e4f);
  EXPECT_EQ(c->final_logit_softcap, 30.0f);

  // No window: every layer global. A pattern of 0: every layer local.
  c = ConfigOf(Gemma3Config(), &keep);
  ASSERT_TRUE(c.ok());
  for (int l = 0; l < 7; ++l) EXPECT_FALSE(c->IsLocalLayer(l));
  w = Gemma3Config();
  w.AddUint32("gemma3.attention.sliding_window", 16).AddUint32("gemma3.attention.sliding_window_pattern", 0);
  c = ConfigOf(w, &keep);
  ASSERT_TRUE(c.ok());
  for (int l = 0; l < 7; ++l) EXPECT_TRUE(c->IsLocalLayer(l));

  // A per-layer pattern array is not read (yet); a negative cap is malformed.
  w = Gemma3Config();
  w.AddInt32Array("gemma3.attention.sliding_window_pattern", {1, 1, 0});
  EXPECT_EQ(ConfigOf(w, &keep).status().code(), LLM_ERR_UNSUPPORTED);
  w = Gemma3Config();
  w.AddFloat32("gemma3.final_logit_softcapping", -1.0f);
  EXPECT_EQ(ConfigOf(w, &keep).status().code(), LLM_ERR_MODEL_FORMAT);
}

GgufWriter BaseConfig() {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("llama.context_length", 64).AddUint32("llama.embedding_length", 32);
  w.AddUint32("llama.block_count", 1).AddUint32("llama.feed_forward_length", 48);
  w.AddUint32("llama.vocab_size", 100);
  return w;
}

// A Llama file leaves every Gemma extra at its default.
TEST(ModelConfigGguf, LlamaHasNoGemmaExtras) {
  std::string keep;
  auto c = ConfigOf(BaseConfig().AddUint32("llama.attention.head_count", 4), &keep);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch_kind, ModelArch::kLlama);
  EXPECT_EQ(c->rope_style, RopeStyle::kAdjacent);
  EXPECT_EQ(c->ffn_act, FfnActivation::kSilu);
  EXPECT_EQ(c->embd_scale, 1.0f);
  EXPECT_EQ(c->attn_scale, 0.0f);
  EXPECT_FALSE(c->qk_norm || c->post_norms);
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_EQ(c->final_logit_softcap, 0.0f);
  for (int l = 0; l < c->n_layer; ++l) EXPECT_FALSE(c->IsLocalLayer(l));
}

TEST(ModelConfigGguf, BadConfigs) {
  std::string keep;
  struct Case {
    const char* what;
    GgufWriter w;
    llm_status code;
  };
  std::vector<Case> cases;
  cases.push_back({"no arch", GgufWriter().AddUint32("x", 1), LLM_ERR_MODEL_FORMAT});
  cases.push_back({"gpt2", GgufWriter().AddString("general.architecture", "gpt2"), LLM_ERR_UNSUPPORTED});
  cases.push_back({"arch not a string", GgufWriter().AddUint32("general.architecture", 1), LLM_ERR_MODEL_FORMAT});
  cases.push_back({"no heads", BaseConfig(), LLM_ERR_MODEL_FORMAT});
  cases.push_back({"gqa", BaseConfig().AddUint32("llama.attention.head_count", 4).AddUint32("llama.attention.head_count_kv", 3), LLM_ERR_MODEL_FORMAT});
  cases.push_back({"odd head dim", BaseConfig().AddUint32("llama.attention.head_count", 32), LLM_ERR_MODEL_FORMAT});
  cases.push_back({"embd % heads", BaseConfig().AddUint32("llama.attention.head_count", 5), LLM_ERR_MODEL_FORMAT});
  cases.push_back({"zero heads", BaseConfig().AddUint32("llama.attention.head_count", 0), LLM_ERR_MODEL_FORMAT});
  cases.push_back({"huge layers", GgufWriter().AddString("general.architecture", "llama").AddUint32("llama.context_length", 64).AddUint32("llama.embedding_length", 32).AddUint32("llama.block_count", 5000), LLM_ERR_MODEL_FORMAT});
  cases.push_back({"negative eps", BaseConfig().AddUint32("llama.attention.head_count", 4).AddFloat32("llama.attention.layer_norm_rms_epsilon", -1), LLM_ERR_MODEL_FORMAT});
  cases.push_back({"nan theta", BaseConfig().AddUint32("llama.attention.head_count", 4).AddFloat32("llama.rope.freq_base", NAN), LLM_ERR_MODEL_FORMAT});
  cases.push_back({"float as int", BaseConfig().AddFloat32("llama.attention.head_count", 4), LLM_ERR_MODEL_FORMAT});
  cases.push_back({"rope dim > head dim", BaseConfig().AddUint32("llama.attention.head_count", 4).AddUint32("llama.rope.dimension_count", 16), LLM_ERR_MODEL_FORMAT});
  cases.push_back({"scaling type", BaseConfig().AddUint32("llama.attention.head_count", 4).AddString("llama.rope.scaling.type", "longrope"), LLM_ERR_UNSUPPORTED});
  cases.push_back({"value length", BaseConfig().AddUint32("llama.attention.head_count", 4).AddUint32("llama.attention.value_length", 16), LLM_ERR_UNSUPPORTED});
  for (Case& c : cases) {
    auto r = ConfigOf(c.w, &keep);
    EXPECT_EQ(r.status().code(), c.code) << c.what << ": " << r.status().message();
  }
}

TEST(ModelWeightsGguf, WrongShapeOrTypeNamesTheTensor) {
  std::string bytes = test::MakeTinyLlama().Serialize();
  auto f = Parse(bytes);
  auto c = ModelConfig::FromGguf(*f.value()).value();
  ModelConfig wrong = c;
  wrong.n_ff = 32;
  auto r = ModelWeights::FromGguf(*f.value(), wrong);
  EXPECT_EQ(r.status().code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_NE(r.status().message().find("blk.0.ffn_gate.weight"), std::string::npos);

  // A Q4_0 model: every matrix type the GGUF layer reads, the backends read.
  test::TinyLlamaOptions o;
  o.matrix_type = TensorType::Q4_0;
  std::string qb = test::MakeTinyLlama(o).Serialize();
  auto qf = Parse(qb);
  ASSERT_TRUE(qf.ok()) << qf.status().message();
  ModelConfig qc = ModelConfig::FromGguf(*qf.value()).value();
  auto qr = ModelWeights::FromGguf(*qf.value(), qc);
  ASSERT_TRUE(qr.ok()) << qr.status().message();
  EXPECT_EQ(qr->token_embd.type, TensorType::Q4_0);
  EXPECT_EQ(qr->token_embd.row_bytes, TensorRowBytes(TensorType::Q4_0, qc.n_embd));

  // A missing tensor.
  ModelConfig three = c;
  three.n_layer = 3;
  auto mr = ModelWeights::FromGguf(*f.value(), three);
  EXPECT_EQ(mr.status().code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_NE(mr.status().message().find("blk.2.attn_norm.weight"), std::string::npos);
}

TEST(ModelWeightsGguf, NormMustBeF32) {
  GgufWriter w = test::MakeTinyLlama();
  std::string bytes = w.Serialize();
  // Patch output_norm's type id (F32 -> F16 keeps the extent valid).
  auto f = Parse(bytes);
  const GgufTensorInfo* t = f.value()->FindTensor("output_norm.weight");
  ASSERT_NE(t, nullptr);
  std::string needle = EncodeString("output_norm.weight") + EncodePod<uint32_t>(1) +
                       EncodePod<uint64_t>(32) + EncodePod<uint32_t>(0);
  size_t at = bytes.find(needle);
  ASSERT_NE(at, std::string::npos);
  bytes[at + needle.size() - 4] = 1;
  auto g = Parse(bytes);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto c = ModelConfig::FromGguf(*g.value());
  auto r = ModelWeights::FromGguf(*g.value(), c.value());
  EXPECT_EQ(r.status().code(), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(r.status().message().find("output_norm.weight"), std::string::npos);
}

}  // namespace
}  // namespace llm
