// Hostile model files through the public C API: every file of a generated
// suite (hostile counts, overlapping or misplaced tensors, invalid UTF-8,
// nesting, vocabulary mismatches, overflowing or absurd sizes) must make
// llm_ctx_create fail with a model-load status (MODEL_FORMAT, UNSUPPORTED or
// IO) and a message, while the peak RSS of loading stays below
// 2 x file size + 64 MiB.
//
// Each file is loaded in a forked child: it resets its RSS high-water mark
// (/proc/self/clear_refs), calls llm_ctx_create, and reports the status, the
// message and how far VmHWM rose above its starting VmRSS through a pipe. A
// crash or an abort in the child fails the case with the signal.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "llm.h"
#include "support/gguf_writer.h"
#include "support/test_paths.h"

namespace llm::test {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

// --------------------------------------------------------- measuring a load

// VmRSS / VmHWM of this process, in bytes (0 if unreadable).
uint64_t ProcStatusBytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') {
      return std::strtoull(line.c_str() + n + 1, nullptr, 10) * 1024;
    }
  }
  return 0;
}

struct LoadResult {
  bool exited = false;   // false: the child died (signal) or the pipe broke
  int signal = 0;
  llm_status status = LLM_OK;
  uint64_t peak_growth = 0;  // bytes VmHWM rose above the starting VmRSS
  std::string message;
};

struct ChildReport {
  int32_t status;
  uint64_t peak_growth;
  char message[512];
};

LoadResult LoadInChild(const std::string& path) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    int clear = open("/proc/self/clear_refs", O_WRONLY);
    if (clear >= 0) {
      (void)!write(clear, "5", 1);  // reset VmHWM to the current VmRSS
      close(clear);
    }
    const uint64_t start = ProcStatusBytes("VmRSS");
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    p.model_path = path.c_str();
    p.n_threads = 1;
    llm_ctx* ctx = nullptr;
    ChildReport rep{};
    rep.status = llm_ctx_create(&p, &ctx);
    const uint64_t hwm = ProcStatusBytes("VmHWM");
    rep.peak_growth = hwm > start ? hwm - start : 0;
    std::snprintf(rep.message, sizeof rep.message, "%s", llm_last_error());
    llm_ctx_destroy(ctx);
    (void)!write(fds[1], &rep, sizeof rep);
    _exit(0);
  }
  close(fds[1]);
  ChildReport rep{};
  const ssize_t got = read(fds[0], &rep, sizeof rep);
  close(fds[0]);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  LoadResult r;
  if (WIFSIGNALED(wstatus)) r.signal = WTERMSIG(wstatus);
  r.exited = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0 && got == sizeof rep;
  r.status = rep.status;
  r.peak_growth = rep.peak_growth;
  r.message.assign(rep.message, strnlen(rep.message, sizeof rep.message));
  return r;
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "llmrt_hostile_" + std::to_string(::getpid()) + "_" + name + ".gguf";
}

// ------------------------------------------------------------- the files

// Position of `needle`'s tensor-info record fields: returns the offset of
// its u32 type (the u64 data offset follows).
size_t TensorTypeField(const std::string& file, const std::string& name) {
  const std::string key = EncodeString(name);
  const size_t at = file.find(key);
  if (at == std::string::npos) return std::string::npos;
  uint32_t n_dims = 0;
  std::memcpy(&n_dims, file.data() + at + key.size(), 4);
  return at + key.size() + 4 + 8 * size_t{n_dims};
}
uint64_t ReadU64(const std::string& f, size_t at) {
  uint64_t v;
  std::memcpy(&v, f.data() + at, 8);
  return v;
}
void WriteU64(std::string* f, size_t at, uint64_t v) { std::memcpy(f->data() + at, &v, 8); }

TinyLlamaOptions Tiny() {
  TinyLlamaOptions o;
  o.n_vocab = 262;
  o.n_embd = 16;
  o.n_head = 2;
  o.n_head_kv = 1;
  o.n_ff = 16;
  o.n_layer = 1;
  o.n_ctx = 64;
  o.matrix_type = TensorType::F16;
  return o;
}
std::string TinyModel() { return MakeTinyLlama(Tiny()).Serialize(); }

// The tiny model with 256-wide rows in a lattice type (IQ2_XXS, IQ2_XS,
// IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M: 256-weight super-blocks of random indices, signs and scales).
std::string LatticeModel(TensorType t) {
  TinyLlamaOptions o = Tiny();
  o.n_embd = 256;
  o.n_ff = 256;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.matrix_type = t;
  return MakeTinyLlama(o).Serialize();
}

// A model's metadata with one key replaced or added (by rebuilding the tiny
// model's key/value list through the writer).
std::string ModelWithKeys(const std::function<void(GgufWriter&)>& extra,
                          const std::function<void(TinyLlamaOptions&)>& opt = nullptr) {
  TinyLlamaOptions o = Tiny();
  if (opt) opt(o);
  GgufWriter w = MakeTinyLlama(o);
  extra(w);
  return w.Serialize();
}

// The tiny model with the value of integer key `key` (u32) patched to `v`.
std::string PatchU32Key(std::string file, const std::string& key, uint32_t v) {
  const std::string enc = EncodeString(key) + EncodePod<uint32_t>(static_cast<uint32_t>(GgufType::kUint32));
  const size_t at = file.find(enc);
  if (at == std::string::npos) return {};
  std::memcpy(file.data() + at + enc.size(), &v, 4);
  return file;
}

// A minimal llama (n_embd 2, one layer, F16) with `n_tokens` empty-string
// SentencePiece tokens and `n_rows` embedding rows; llama.vocab_size when given.
std::string BareModel(int n_tokens, int n_rows, std::optional<uint32_t> vocab_size) {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("llama.context_length", 64).AddUint32("llama.embedding_length", 2);
  w.AddUint32("llama.block_count", 1).AddUint32("llama.feed_forward_length", 2);
  w.AddUint32("llama.attention.head_count", 1);
  if (vocab_size) w.AddUint32("llama.vocab_size", *vocab_size);
  w.AddString("tokenizer.ggml.model", "llama");
  std::string toks;
  for (int i = 0; i < n_tokens; ++i) toks += EncodeString(i < 3 ? std::to_string(i) : std::string());
  w.AddArray("tokenizer.ggml.tokens", GgufType::kString, static_cast<uint64_t>(n_tokens), toks);
  w.AddTensor("token_embd.weight", TensorType::F16, {2, n_rows});
  w.AddTensor("output_norm.weight", TensorType::F32, {2});
  for (const char* t : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
    w.AddTensor(std::string("blk.0.") + t + ".weight", TensorType::F16, {2, 2});
  }
  w.AddTensor("blk.0.attn_norm.weight", TensorType::F32, {2});
  w.AddTensor("blk.0.ffn_norm.weight", TensorType::F32, {2});
  return w.Serialize();
}

struct Case {
  std::string name;
  std::string bytes;
  std::vector<llm_status> want;  // any of these
};

std::vector<Case> Suite() {
  const std::vector<llm_status> fmt = {LLM_ERR_MODEL_FORMAT};
  const std::vector<llm_status> fmt_or_unsup = {LLM_ERR_MODEL_FORMAT, LLM_ERR_UNSUPPORTED};
  std::vector<Case> c;
  const std::string tiny = TinyModel();
  const uint64_t data_offset = GgufFile::FromMemory(tiny.data(), tiny.size()).value()->data_offset();

  // --- header counts ---
  c.push_back({"empty file", "", fmt});
  c.push_back({"huge tensor count", MakeTinyLlama(Tiny()).SetCounts(uint64_t{1} << 60, std::nullopt).Serialize(), fmt});
  c.push_back({"huge kv count", MakeTinyLlama(Tiny()).SetCounts(std::nullopt, ~uint64_t{0}).Serialize(), fmt});
  c.push_back({"kv count one too many", MakeTinyLlama(Tiny()).SetCounts(std::nullopt, 25).Serialize(), fmt});
  {
    GgufWriter w;  // many tiny keys: the count fits the bytes, but no model
    for (int i = 0; i < 200000; ++i) w.AddUint8("k" + std::to_string(i), 1);
    c.push_back({"200k metadata keys", w.Serialize(), fmt});
  }
  {
    GgufWriter w;  // many tiny tensors
    w.AddString("general.architecture", "llama");
    for (int i = 0; i < 100000; ++i) w.AddTensor("t" + std::to_string(i), TensorType::F32, {1});
    c.push_back({"100k tensors", w.Serialize(), fmt});
  }
  {
    GgufWriter w;
    w.AddArray("a", GgufType::kString, uint64_t{1} << 40, EncodeString("x"));
    c.push_back({"huge array count", w.Serialize(), fmt});
  }
  {
    GgufWriter w;
    w.AddRawKv("s", static_cast<uint32_t>(GgufType::kString), EncodePod<uint64_t>(uint64_t{1} << 50) + "abc");
    c.push_back({"huge string length", w.Serialize(), fmt});
  }

  // --- tensor placement ---
  {
    std::string b = tiny;
    const size_t out = TensorTypeField(b, "output.weight");
    const size_t emb = TensorTypeField(b, "token_embd.weight");
    WriteU64(&b, out + 4, ReadU64(b, emb + 4));  // same bytes as token_embd
    c.push_back({"overlapping tensors", b, fmt});
  }
  {
    std::string b = tiny;
    const size_t q = TensorTypeField(b, "blk.0.attn_q.weight");
    const size_t emb = TensorTypeField(b, "token_embd.weight");
    WriteU64(&b, q + 4, ReadU64(b, emb + 4) + 64);  // inside token_embd
    c.push_back({"tensor inside another", b, fmt});
  }
  {
    std::string b = tiny;
    WriteU64(&b, TensorTypeField(b, "output_norm.weight") + 4, uint64_t{1} << 40);
    c.push_back({"offset past the end", b, fmt});
  }
  {
    std::string b = tiny;
    WriteU64(&b, TensorTypeField(b, "output_norm.weight") + 4, ~uint64_t{0} - 31);
    c.push_back({"offset wraps around", b, fmt});
  }
  {
    std::string b = tiny;
    const size_t f = TensorTypeField(b, "output_norm.weight") + 4;
    WriteU64(&b, f, ReadU64(b, f) + 4);
    c.push_back({"misaligned data", b, fmt});
  }
  c.push_back({"truncated data", tiny.substr(0, tiny.size() - 1), fmt});
  c.push_back({"truncated header", tiny.substr(0, data_offset / 2), fmt});
  {
    std::string b = tiny;
    const size_t f = TensorTypeField(b, "blk.0.attn_k.weight");
    uint32_t bogus = 1000;
    std::memcpy(b.data() + f, &bogus, 4);
    c.push_back({"unknown tensor type", b, fmt_or_unsup});
  }
  // The low-bit types over a row of 16 weights: not a whole block (IQ4_NL's
  // and MXFP4's 32; Q2_K's, Q3_K's, IQ4_XS's, the IQ2/IQ3 lattices' and TQ's 256),
  // so no block of the tensor is whole.
  for (uint32_t type : {10u, 11u, 16u, 17u, 18u, 19u, 20u, 21u, 22u, 23u, 29u, 34u, 35u, 39u}) {
    std::string b = tiny;
    std::memcpy(b.data() + TensorTypeField(b, "blk.0.attn_k.weight"), &type, 4);
    c.push_back({"partial low-bit block, type " + std::to_string(type), b, fmt});
  }
  // An IQ3_XXS / IQ2_XS model whose last super-block is cut short. (Every
  // bit pattern of their grid and sign indices names a table entry: no index
  // can be out of range, so the block count is what a loader must check.)
  for (TensorType t : {TensorType::IQ3_XXS, TensorType::IQ2_XS}) {
    const std::string m = LatticeModel(t);
    c.push_back({std::string("truncated lattice blocks, type ") + std::to_string(static_cast<int>(t)),
                 m.substr(0, m.size() - 40), fmt});
  }

  // --- names and values ---
  c.push_back({"invalid UTF-8 in a key", ModelWithKeys([](GgufWriter& w) { w.AddUint32("bad.\xff\xfe.key", 1); }), fmt});
  c.push_back({"overlong UTF-8 in a key", ModelWithKeys([](GgufWriter& w) { w.AddUint32("k\xC0\xAF", 1); }), fmt});
  {
    std::string b = tiny;
    const std::string name = EncodeString("output_norm.weight");
    const size_t at = b.find(name);
    b[at + 8] = '\xC3';  // "\xC3" + "utput_norm.weight": a lead byte without continuation
    c.push_back({"invalid UTF-8 in a tensor name", b, fmt});
  }
  {
    std::string deep;
    for (int i = 0; i < 64; ++i) deep += EncodePod<uint32_t>(static_cast<uint32_t>(GgufType::kArray)) + EncodePod<uint64_t>(1);
    deep += EncodePod<uint32_t>(static_cast<uint32_t>(GgufType::kUint8)) + EncodePod<uint64_t>(0);
    c.push_back({"deeply nested arrays", ModelWithKeys([&](GgufWriter& w) { w.AddRawKv("deep", 9, deep); }), fmt});
  }
  c.push_back({"unknown value type", ModelWithKeys([](GgufWriter& w) { w.AddRawKv("x", 77, EncodePod<uint32_t>(0)); }), fmt});
  c.push_back({"duplicate key", ModelWithKeys([](GgufWriter& w) { w.AddUint32("llama.block_count", 1); }), fmt});
  c.push_back({"version 4", MakeTinyLlama(Tiny()).SetVersion(4).Serialize(), {LLM_ERR_UNSUPPORTED}});
  c.push_back({"alignment not a power of two", ModelWithKeys([](GgufWriter& w) { w.SetAlignment(48); }), fmt});

  // --- sizes ---
  c.push_back({"absurd block_count", PatchU32Key(tiny, "llama.block_count", 1u << 30), fmt});
  c.push_back({"absurd embedding_length", PatchU32Key(tiny, "llama.embedding_length", 0xFFFFFFF0u), fmt});
  c.push_back({"absurd context_length", PatchU32Key(tiny, "llama.context_length", 0xFFFFFFFFu), fmt});
  c.push_back({"absurd feed_forward_length", PatchU32Key(tiny, "llama.feed_forward_length", 0xFFFFFFFFu), fmt});
  c.push_back({"zero heads", PatchU32Key(tiny, "llama.attention.head_count", 0), fmt});
  c.push_back({"block_count off by one", PatchU32Key(tiny, "llama.block_count", 2), fmt});
  c.push_back({"embedding_length disagrees with tensors", PatchU32Key(tiny, "llama.embedding_length", 32), fmt});
  {
    GgufWriter w = MakeTinyLlama(Tiny());
    w.AddTensorRaw("huge", 0, {uint64_t{1} << 32, uint64_t{1} << 32}, "");
    c.push_back({"dims product overflows", w.Serialize(), fmt});
  }
  {
    GgufWriter w = MakeTinyLlama(Tiny());
    w.AddTensorRaw("big", 0, {uint64_t{1} << 20, uint64_t{1} << 20}, "");
    c.push_back({"tensor bytes past the file", w.Serialize(), fmt});
  }

  // --- vocabulary ---
  c.push_back({"vocab_size disagrees with tokenizer and embeddings",
               ModelWithKeys([](GgufWriter& w) { w.AddUint32("llama.vocab_size", 300); }), fmt});
  c.push_back({"tokenizer smaller than the embeddings", BareModel(262, 300, 300), fmt});
  c.push_back({"tokenizer larger than the embeddings", BareModel(300, 262, std::nullopt), fmt});
  {
    GgufWriter w;
    w.AddString("general.architecture", "llama");
    w.AddString("tokenizer.ggml.model", "llama");
    w.AddArray("tokenizer.ggml.tokens", GgufType::kString, 3, EncodeString("a") + EncodeString("b") + EncodeString("c"));
    w.AddArray("tokenizer.ggml.token_type", GgufType::kUint8, 4000000, std::string(4000000, '\1'));
    c.push_back({"token_type array far longer than the vocabulary", w.Serialize(), fmt});
  }
  // A vocabulary of one million empty tokens with two-wide embeddings: a few
  // MiB of file that a tokenizer would blow up to hundreds of MiB.
  c.push_back({"million-token vocabulary in a small file", BareModel(1000000, 1000000, std::nullopt), fmt});
  c.push_back({"duplicate tokenizer type", ModelWithKeys([](GgufWriter& w) { w.AddString("tokenizer.ggml.model", "bert"); }),
               fmt_or_unsup});
  c.push_back({"architecture", ModelWithKeys([](GgufWriter& w) { w.AddString("general.architecture", "gpt2"); }),
               fmt_or_unsup});
  return c;
}

// ----------------------------------------------------------------- tests

TEST(HostileModels, RejectedWithStatusMessageAndBoundedMemory) {
  int n = 0;
  for (const Case& c : Suite()) {
    SCOPED_TRACE(c.name);
    ASSERT_FALSE(c.want.empty());
    const std::string path = TempPath(std::to_string(n++));
    {
      std::ofstream out(path, std::ios::binary);
      out.write(c.bytes.data(), static_cast<std::streamsize>(c.bytes.size()));
    }
    const LoadResult r = LoadInChild(path);
    std::remove(path.c_str());
    ASSERT_TRUE(r.exited) << "the loading process died (signal " << r.signal << ")";
    EXPECT_NE(std::find(c.want.begin(), c.want.end(), r.status), c.want.end())
        << "got " << llm_status_str(r.status) << ": " << r.message;
    EXPECT_FALSE(r.message.empty());
    const uint64_t budget = 2 * c.bytes.size() + 64 * kMiB;
    EXPECT_LT(r.peak_growth, budget) << "peak RSS grew by " << r.peak_growth / kMiB << " MiB for a "
                                     << c.bytes.size() / 1024 << " KiB file";
  }
  EXPECT_GE(n, 30);
}

// The measurement itself: a valid file loads, and its peak is reported.
TEST(HostileModels, ValidTinyModelLoadsInChild) {
  const std::string path = TempPath("valid");
  const std::string bytes = TinyModel();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const LoadResult r = LoadInChild(path);
  std::remove(path.c_str());
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.status, LLM_OK) << r.message;
  EXPECT_GT(r.peak_growth, 0u);
}

// A valid file of each lattice type loads (the same child measurement).
TEST(HostileModels, ValidLatticeModelsLoadInChild) {
  for (TensorType t : {TensorType::IQ2_XXS, TensorType::IQ2_XS, TensorType::IQ2_S, TensorType::IQ3_XXS,
                       TensorType::IQ3_S, TensorType::IQ1_S, TensorType::IQ1_M}) {
    const std::string path = TempPath("lattice");
    const std::string bytes = LatticeModel(t);
    {
      std::ofstream out(path, std::ios::binary);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    const LoadResult r = LoadInChild(path);
    std::remove(path.c_str());
    ASSERT_TRUE(r.exited);
    EXPECT_EQ(r.status, LLM_OK) << static_cast<int>(t) << ": " << r.message;
  }
}

}  // namespace
}  // namespace llm::test
