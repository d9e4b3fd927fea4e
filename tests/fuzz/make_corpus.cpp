// Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/:
//   gguf/       small valid models (F16, Q8_0, IQ3_XXS, tied, gpt-oss with MXFP4 experts;
//               nomic-bert and an XLM-R cross-encoder), a BPE vocabulary, and
//               truncated and bit-flipped variants of them
//   tokenizer/  texts for each vocabulary and flag combination
//   hf_json/    minimal tokenizer.json (+ tokenizer_config.json after a NUL)
//   capi/       request encodings (any bytes decode to some request)
// Usage: llm_fuzz_make_corpus OUT_DIR   (run by hand; the output is committed)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "support/gguf_writer.h"

using namespace llm;        // NOLINT
using namespace llm::test;  // NOLINT
namespace fs = std::filesystem;

namespace {

void Put(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string SmallBpeVocabFile() {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddString("tokenizer.ggml.pre", "llama-bpe");
  std::vector<std::string> tokens;
  for (char c = '!'; c <= '~'; ++c) tokens.emplace_back(1, c);
  tokens.push_back("\xC4\xA0");  // "Ġ", the byte-level space
  tokens.push_back("\xC4\x8A");  // "Ċ", newline
  tokens.push_back("\xC4\xA0t");
  tokens.push_back("he");
  tokens.push_back("\xC4\xA0the");
  tokens.push_back("<|begin_of_text|>");
  tokens.push_back("<|eot_id|>");
  std::vector<int32_t> types(tokens.size(), 1);
  types[types.size() - 1] = 3;
  types[types.size() - 2] = 3;
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddInt32Array("tokenizer.ggml.token_type", types);
  w.AddStringArray("tokenizer.ggml.merges", {"\xC4\xA0 t", "h e", "\xC4\xA0t he"});
  w.AddUint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(tokens.size() - 2));
  w.AddUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(tokens.size() - 1));
  return w.Serialize();
}

// A tiny encoder (8 wide, one layer, 4 token rows written as zeros):
// `nomic-bert` (attn_qkv, ffn_gate, no position_embd, WordPiece) or an
// XLM-RoBERTa `bert` (one token type, a `t5` Unigram vocabulary with a
// separator and add_sep, a classifier head).
std::string TinyEncoderFile(bool nomic) {
  GgufWriter w;
  const std::string arch = nomic ? "nomic-bert" : "bert", a = arch + ".";
  w.AddString("general.architecture", arch);
  w.AddUint32(a + "context_length", 16);
  w.AddUint32(a + "embedding_length", 8);
  w.AddUint32(a + "block_count", 1);
  w.AddUint32(a + "feed_forward_length", 16);
  w.AddUint32(a + "attention.head_count", 2);
  w.AddFloat32(a + "attention.layer_norm_epsilon", 1e-12f);
  w.AddBool(a + "attention.causal", false);
  w.AddUint32(a + "pooling_type", nomic ? 1 : 4);
  if (nomic) {
    w.AddFloat32(a + "rope.freq_base", 1000.0f);
    w.AddString("tokenizer.ggml.model", "bert");
    w.AddStringArray("tokenizer.ggml.tokens", {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xE2\x96\x81" "a", "a"});
    w.AddInt32Array("tokenizer.ggml.token_type", {3, 2, 3, 3, 1, 1});
    w.AddUint32("tokenizer.ggml.cls_token_id", 2);
    w.AddUint32("tokenizer.ggml.seperator_token_id", 3);
  } else {
    w.AddString("tokenizer.ggml.model", "t5");
    w.AddStringArray("tokenizer.ggml.tokens", {"<s>", "<pad>", "</s>", "<unk>", "\xE2\x96\x81", "a", "\xE2\x96\x81" "a"});
    w.AddFloatArray("tokenizer.ggml.scores", {0, 0, 0, 0, -2.0f, -3.0f, -1.5f});
    w.AddInt32Array("tokenizer.ggml.token_type", {3, 3, 3, 2, 1, 1, 1});
    w.AddUint32("tokenizer.ggml.bos_token_id", 0);
    w.AddUint32("tokenizer.ggml.eos_token_id", 2);
    w.AddUint32("tokenizer.ggml.unknown_token_id", 3);
    w.AddUint32("tokenizer.ggml.seperator_token_id", 2);
    w.AddBool("tokenizer.ggml.add_bos_token", true);
    w.AddBool("tokenizer.ggml.add_eos_token", true);
    w.AddBool("tokenizer.ggml.add_sep_token", true);
    w.AddBool("tokenizer.ggml.remove_extra_whitespaces", true);
  }
  const int64_t V = nomic ? 6 : 7;
  w.AddTensor("token_embd.weight", TensorType::F16, {8, V});
  w.AddTensor("token_types.weight", TensorType::F32, {8, nomic ? 2 : 1});
  if (!nomic) w.AddTensor("position_embd.weight", TensorType::F16, {8, 16});
  w.AddTensor("token_embd_norm.weight", TensorType::F32, {8});
  w.AddTensor("token_embd_norm.bias", TensorType::F32, {8});
  if (nomic) {
    w.AddTensor("blk.0.attn_qkv.weight", TensorType::F16, {8, 24});
  } else {
    for (const char* n : {"blk.0.attn_q", "blk.0.attn_k", "blk.0.attn_v"}) {
      w.AddTensor(std::string(n) + ".weight", TensorType::F16, {8, 8});
      w.AddTensor(std::string(n) + ".bias", TensorType::F32, {8});
    }
  }
  w.AddTensor("blk.0.attn_output.weight", TensorType::F16, {8, 8});
  if (!nomic) w.AddTensor("blk.0.attn_output.bias", TensorType::F32, {8});
  w.AddTensor("blk.0.attn_output_norm.weight", TensorType::F32, {8});
  w.AddTensor("blk.0.attn_output_norm.bias", TensorType::F32, {8});
  w.AddTensor("blk.0.ffn_up.weight", TensorType::F16, {8, 16});
  if (nomic) w.AddTensor("blk.0.ffn_gate.weight", TensorType::F16, {8, 16});
  w.AddTensor("blk.0.ffn_down.weight", TensorType::F16, {16, 8});
  if (!nomic) {
    w.AddTensor("blk.0.ffn_up.bias", TensorType::F32, {16});
    w.AddTensor("blk.0.ffn_down.bias", TensorType::F32, {8});
  }
  w.AddTensor("blk.0.layer_output_norm.weight", TensorType::F32, {8});
  w.AddTensor("blk.0.layer_output_norm.bias", TensorType::F32, {8});
  if (!nomic) {
    w.AddTensor("cls.weight", TensorType::F16, {8, 8});
    w.AddTensor("cls.bias", TensorType::F32, {8});
    w.AddTensor("cls.output.weight", TensorType::F16, {8, 1});
    w.AddTensor("cls.output.bias", TensorType::F32, {1});
  }
  return w.Serialize();
}

}  // namespace

// A tiny gpt-oss file: attention sinks, biases on q/k/v/o, the router and
// the experts, post_attention_norm, two experts in MXFP4 (E8M0 exponents
// 120..127, random codes), YaRN and a window: the gpt-oss reading of
// ModelConfig and ModelWeights. Its own random stream, so the other seeds
// stay as they were.
std::string TinyGptOss() {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.5f);
  const int64_t E = 32, H = 2, HK = 1, HD = 16, NE = 2, FE = 32, V = 64;
  GgufWriter w;
  const std::string a = "gpt-oss.";
  w.AddString("general.architecture", "gpt-oss");
  w.AddUint32(a + "context_length", 256).AddUint32(a + "embedding_length", E).AddUint32(a + "block_count", 1);
  w.AddUint32(a + "feed_forward_length", FE).AddUint32(a + "attention.head_count", H);
  w.AddUint32(a + "attention.head_count_kv", HK).AddUint32(a + "attention.key_length", HD);
  w.AddUint32(a + "attention.value_length", HD).AddUint32(a + "vocab_size", V);
  w.AddUint32(a + "attention.sliding_window", 8).AddUint32(a + "expert_count", NE);
  w.AddUint32(a + "expert_used_count", 1).AddUint32(a + "expert_feed_forward_length", FE);
  w.AddFloat32(a + "rope.freq_base", 150000.0f).AddFloat32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.AddString(a + "rope.scaling.type", "yarn").AddFloat32(a + "rope.scaling.factor", 32.0f);
  w.AddUint32(a + "rope.scaling.original_context_length", 64);
  auto f32 = [&](int64_t n) {
    std::string b(static_cast<size_t>(n) * 4, '\0');
    for (int64_t i = 0; i < n; ++i) {
      const float v = nd(rng);
      std::memcpy(&b[static_cast<size_t>(i) * 4], &v, 4);
    }
    return b;
  };
  auto mxfp4 = [&](int64_t n) {
    std::string b(static_cast<size_t>(n / 32 * 17), '\0');
    for (int64_t k = 0; k < n / 32; ++k) {
      b[static_cast<size_t>(k * 17)] = static_cast<char>(120 + rng() % 8);
      for (int j = 1; j < 17; ++j) b[static_cast<size_t>(k * 17 + j)] = static_cast<char>(rng());
    }
    return b;
  };
  const TensorType F = TensorType::F32;
  w.AddTensor("token_embd.weight", F, {E, V}, f32(E * V));
  w.AddTensor("output_norm.weight", F, {E}, f32(E));
  w.AddTensor("output.weight", F, {E, V}, f32(E * V));
  const std::string p = "blk.0.";
  w.AddTensor(p + "attn_norm.weight", F, {E}, f32(E));
  w.AddTensor(p + "attn_q.weight", F, {E, H * HD}, f32(E * H * HD));
  w.AddTensor(p + "attn_k.weight", F, {E, HK * HD}, f32(E * HK * HD));
  w.AddTensor(p + "attn_v.weight", F, {E, HK * HD}, f32(E * HK * HD));
  w.AddTensor(p + "attn_q.bias", F, {H * HD}, f32(H * HD));
  w.AddTensor(p + "attn_k.bias", F, {HK * HD}, f32(HK * HD));
  w.AddTensor(p + "attn_v.bias", F, {HK * HD}, f32(HK * HD));
  w.AddTensor(p + "attn_output.weight", F, {H * HD, E}, f32(H * HD * E));
  w.AddTensor(p + "attn_output.bias", F, {E}, f32(E));
  w.AddTensor(p + "attn_sinks.weight", F, {H}, f32(H));
  w.AddTensor(p + "post_attention_norm.weight", F, {E}, f32(E));
  w.AddTensor(p + "ffn_gate_inp.weight", F, {E, NE}, f32(E * NE));
  w.AddTensor(p + "ffn_gate_inp.bias", F, {NE}, f32(NE));
  w.AddTensor(p + "ffn_gate_exps.weight", TensorType::MXFP4, {E, FE, NE}, mxfp4(E * FE * NE));
  w.AddTensor(p + "ffn_up_exps.weight", TensorType::MXFP4, {E, FE, NE}, mxfp4(E * FE * NE));
  w.AddTensor(p + "ffn_down_exps.weight", TensorType::MXFP4, {FE, E, NE}, mxfp4(FE * E * NE));
  w.AddTensor(p + "ffn_gate_exps.bias", F, {FE, NE}, f32(FE * NE));
  w.AddTensor(p + "ffn_up_exps.bias", F, {FE, NE}, f32(FE * NE));
  w.AddTensor(p + "ffn_down_exps.bias", F, {E, NE}, f32(E * NE));
  return w.Serialize();
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1];
  std::mt19937_64 rng(42);

  // --- gguf ---
  std::vector<std::pair<std::string, std::string>> models;
  {
    TinyLlamaOptions o;
    o.n_vocab = 262;
    o.n_embd = 16;
    o.n_head = 2;
    o.n_head_kv = 1;
    o.n_ff = 16;
    o.n_layer = 1;
    o.n_ctx = 64;
    o.matrix_type = TensorType::F16;
    models.emplace_back("tiny_f16.gguf", MakeTinyLlama(o).Serialize());
    o.tied = true;
    models.emplace_back("tiny_f16_tied.gguf", MakeTinyLlama(o).Serialize());
    o.tied = false;
    o.n_embd = 32;
    o.n_ff = 32;
    o.n_head = 4;
    o.n_head_kv = 2;
    o.matrix_type = TensorType::Q8_0;
    models.emplace_back("tiny_q8_0.gguf", MakeTinyLlama(o).Serialize());
  }
  models.emplace_back("bpe_vocab.gguf", SmallBpeVocabFile());
  models.emplace_back("tiny_nomic_bert.gguf", TinyEncoderFile(true));
  models.emplace_back("tiny_xlmr_rerank.gguf", TinyEncoderFile(false));
  for (const auto& [name, bytes] : models) {
    Put(out / "gguf", name, bytes);
    auto f = GgufFile::FromMemory(bytes.data(), bytes.size());
    const size_t header = std::min<size_t>(f.ok() ? f.value()->data_offset() : bytes.size(), bytes.size());
    for (size_t cut : {size_t{4}, size_t{24}, header / 3, header / 2, header - 1, header + 100}) {
      if (cut < bytes.size()) Put(out / "gguf", name + ".cut" + std::to_string(cut), bytes.substr(0, cut));
    }
    for (int i = 0; i < 2; ++i) {
      std::string b = bytes;
      for (int e = 0; e < 3; ++e) b[rng() % header] ^= static_cast<char>(1u << (rng() % 8));
      Put(out / "gguf", name + ".flip" + std::to_string(i), b);
    }
  }
  {
    // A lattice-type model (IQ3_XXS super-blocks of 256 weights, tied
    // embeddings): whole, cut inside its header, and cut inside its last
    // block (no flips: the file is 182 KiB, and its header is like the F16 one's).
    TinyLlamaOptions o;
    o.n_vocab = 262;
    o.n_embd = 256;
    o.n_head = 4;
    o.n_head_kv = 2;
    o.n_ff = 256;
    o.n_layer = 1;
    o.n_ctx = 64;
    o.tied = true;
    o.matrix_type = TensorType::IQ3_XXS;
    const std::string bytes = MakeTinyLlama(o).Serialize();
    Put(out / "gguf", "tiny_iq3_xxs.gguf", bytes);
    auto f = GgufFile::FromMemory(bytes.data(), bytes.size());
    const size_t header = f.ok() ? f.value()->data_offset() : bytes.size() / 2;
    Put(out / "gguf", "tiny_iq3_xxs.gguf.cut" + std::to_string(header - 1), bytes.substr(0, header - 1));
    Put(out / "gguf", "tiny_iq3_xxs.gguf.cut" + std::to_string(bytes.size() - 40), bytes.substr(0, bytes.size() - 40));
  }

  {
    // gpt-oss (TinyGptOss): whole, cut inside its header and inside its
    // last tensor, and with a sink's name bit-flipped.
    const std::string bytes = TinyGptOss();
    Put(out / "gguf", "tiny_gpt_oss.gguf", bytes);
    auto f = GgufFile::FromMemory(bytes.data(), bytes.size());
    const size_t header = f.ok() ? f.value()->data_offset() : bytes.size() / 2;
    Put(out / "gguf", "tiny_gpt_oss.gguf.cut" + std::to_string(header / 2), bytes.substr(0, header / 2));
    Put(out / "gguf", "tiny_gpt_oss.gguf.cut" + std::to_string(bytes.size() - 40), bytes.substr(0, bytes.size() - 40));
    std::string flipped = bytes;
    const size_t at = flipped.find("attn_sinks");
    if (at != std::string::npos) flipped[at] ^= 0x20;
    Put(out / "gguf", "tiny_gpt_oss.gguf.sinkname", flipped);
  }

  // --- tokenizer: selector byte (vocab | add_special 0x80 | parse_special 0x40) + text ---
  const char* texts[] = {"Once upon a time, there was a little girl named Lily.",
                         " leading space and  double  spaces\n\nnew lines\ttabs",
                         "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x98\x80 emoji",
                         "<s>control</s> <|endoftext|> <think>user</think> <unk>",
                         "numbers 1234567 3.14 don't I'll we've",
                         ""};
  int n = 0;
  for (uint8_t sel : {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0xC0, 0xC1, 0x42, 0x83}) {
    for (const char* t : texts) Put(out / "tokenizer", "t" + std::to_string(n++), std::string(1, static_cast<char>(sel)) + t);
  }

  // --- hf_json ---
  const std::string vocab =
      R"({"Ġ": 0, "t": 1, "h": 2, "e": 3, "Ġt": 4, "he": 5, "Ġthe": 6, "a": 7, "Ċ": 8})";
  const std::string tj =
      R"({"version": "1.0", "added_tokens": [{"id": 9, "content": "<|begin_of_text|>", "special": true},)"
      R"( {"id": 10, "content": "<|eot_id|>", "special": true}, {"id": 11, "content": "<think>", "special": false}],)"
      R"( "normalizer": null, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": )"
      R"("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},)"
      R"( "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},)"
      R"( "model": {"type": "BPE", "ignore_merges": true, "vocab": )" + vocab +
      R"(, "merges": ["Ġ t", ["h", "e"], "Ġt he"]}})";
  const std::string cfg = R"({"bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|eot_id|>"}, "add_bos_token": true})";
  Put(out / "hf_json", "llama3_like", tj);
  Put(out / "hf_json", "llama3_like_cfg", tj + std::string(1, '\0') + cfg);
  Put(out / "hf_json", "gpt2_like",
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}, "pre_tokenizer": {"type": "ByteLevel"}})");
  Put(out / "hf_json", "numbers", R"([1, -2.5e10, 1e400, "\u00e9\ud83d\ude00", true, false, null, {"a": {}}])");

  // --- capi: arbitrary bytes; a few shapes ---
  Put(out / "capi", "text", std::string("\x00\x00\x00\x00\x00", 5) + "Once upon a time");
  Put(out / "capi", "sampled", std::string("\x7f\x00\x01\x00\x00\x00\x00\x00", 8) + "Lily");
  Put(out / "capi", "tokens", std::string("\x00\x00\x08\x00\x05\x01\x00\x02\x00\x03\x00", 11));
  Put(out / "capi", "stops", std::string("\x00\x00\x02\x02\x01", 5) + "a\0b\0The dog");
  std::printf("corpus written to %s\n", out.c_str());
  return 0;
}
