#include "synth_model.h"
#include "synth_quant.h"

#include <algorithm>
#include <iterator>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <thread>

#include "gguf_stream_writer.h"
#include "util/fp16.h"

namespace llm::synth {
namespace {

const std::vector<SynthShape>& Shapes() {
  static const std::vector<SynthShape> shapes = [] {
    std::vector<SynthShape> v;
    // A few MB: head_dim 64 and GQA 2, so tests reach the tensor-core kernels.
    v.push_back({"tiny", 512, 256, 2, 4, 2, 64, 512, 2048, 10000.0f, 1e-5f, false, 0.0f, 8192});
    v.push_back({"llama-3.2-1b", 128256, 2048, 16, 32, 8, 64, 8192, 131072, 500000.0f, 1e-5f, true, 32.0f, 8192});
    v.push_back({"llama-3.2-3b", 128256, 3072, 28, 24, 8, 128, 8192, 131072, 500000.0f, 1e-5f, true, 32.0f, 8192});
    v.push_back({"llama-3.1-8b", 128256, 4096, 32, 32, 8, 128, 14336, 131072, 500000.0f, 1e-5f, false, 8.0f, 8192});
    v.push_back({"llama-2-7b", 32000, 4096, 32, 32, 32, 128, 11008, 4096, 10000.0f, 1e-5f, false, 0.0f, 8192});
    // The families' test shapes (tests/test_families.cpp): a few hundred KB
    // in F32. tiny-llama3's rope_freqs bite from pair 2 on (original context
    // 64), so a prompt of ~100 tokens shows them; tiny-qwen3's heads are
    // wider than n_embd / n_head, as Qwen3's are (explicit key_length).
    v.push_back({"tiny-llama3", 300, 64, 2, 4, 2, 16, 128, 4096, 500000.0f, 1e-5f, false, 8.0f, 64, "llama"});
    v.push_back({"tiny-qwen2", 300, 64, 2, 4, 2, 16, 128, 4096, 1000000.0f, 1e-6f, true, 0.0f, 8192, "qwen2"});
    v.push_back({"tiny-qwen3", 300, 64, 2, 4, 2, 32, 128, 4096, 1000000.0f, 1e-6f, true, 0.0f, 8192, "qwen3"});
    // Qwen2-VL / Qwen2.5-VL's text side: tiny-qwen2 with M-RoPE sections
    // (t, h, w) = (2, 3, 3) of the 8 rotated pairs (the released 16/24/24 of 64).
    v.push_back({"tiny-qwen2vl", 300, 64, 2, 4, 2, 16, 128, 4096, 1000000.0f, 1e-6f, true, 0.0f, 8192, "qwen2vl"});
    // Mistral: a `llama` file with heads wider than n_embd / n_head and a
    // sliding window shorter than the test prompts.
    v.push_back({"tiny-mistral", 300, 64, 2, 4, 2, 32, 128, 4096, 1000000.0f, 1e-5f, false, 0.0f, 8192, "llama", 32});
    // Gemma 2: 4 layers, even ones local with a window of 32; head_dim 32.
    v.push_back({"tiny-gemma2", 300, 64, 4, 4, 2, 32, 128, 4096, 10000.0f, 1e-6f, true, 0.0f, 8192, "gemma2", 32});
    // Gemma 3: 6 layers, five local (window 32, base 10000) then one global
    // (base 1e6), q/k norms; for the HF-vs-GGUF test (no llama.cpp reference).
    v.push_back({"tiny-gemma3", 300, 64, 6, 4, 1, 32, 128, 4096, 1000000.0f, 1e-6f, true, 0.0f, 8192, "gemma3", 32});
    // The text models of the vision-language families' tiny projectors
    // (synth_mmproj.h): Llamas whose vocabularies end with the image
    // layout's tokens (SyntheticVocab's specials below).
    // The text side of the Gemma 3 vision benchmark (bench/vision_encode_bench.py):
    // Gemma 3 4B's width 2560 (the projector's output), one layer, a small
    // vocabulary; the benchmark times the tower, not this model.
    v.push_back({"gemma3-4b-vision", 300, 2560, 1, 8, 4, 256, 10240, 4096, 1000000.0f, 1e-6f, true, 0.0f, 8192, "gemma3", 1024});
    v.push_back({"tiny-llava", 300, 64, 2, 4, 2, 16, 128, 4096, 10000.0f, 1e-5f, false, 0.0f, 8192, "llama"});
    v.push_back({"tiny-smolvlm", 300, 64, 2, 4, 2, 16, 128, 4096, 100000.0f, 1e-5f, false, 0.0f, 8192, "llama"});
    // Phi-3: fused tensors, 24 of 32 dimensions rotated, a window of 32
    // that llama.cpp reads and does not apply.
    v.push_back({"tiny-phi3", 300, 128, 2, 4, 2, 32, 128, 4096, 10000.0f, 1e-5f, false, 0.0f, 8192, "phi3", 32, 24});
    // Phi-3.5's LongRoPE: original context 64, so a context of 256 runs with
    // the long factors (attn_factor sqrt(2)); -short: original 1024, the
    // short factors at 256 (attn_factor sqrt(1.2)).
    for (int32_t orig : {64, 1024}) {
      SynthShape p{orig == 64 ? "tiny-phi35" : "tiny-phi35-short", 300, 128, 2, 4, 2, 32, 128, 4096, 10000.0f, 1e-5f,
                   false, 0.0f, 8192, "phi3", 32, 24};
      p.longrope_original_ctx = orig;
      v.push_back(p);
    }
    // Mixture of Experts: 4 experts, 2 per token.
    v.push_back({"tiny-mixtral", 300, 64, 2, 4, 2, 16, 128, 4096, 1000000.0f, 1e-5f, false, 0.0f, 8192, "llama", 0, 0,
                 4, 2, 0});
    // Qwen2.5 with YaRN: original context 64, so pairs from 2 on are
    // interpolated and the 96-token prompt runs past it.
    v.push_back({"tiny-qwen2-yarn", 300, 64, 2, 4, 2, 16, 128, 4096, 1000000.0f, 1e-6f, true, 0.0f, 8192, "qwen2", 0,
                 0, 0, 0, 0, 4.0f, 64});
    // MoE benchmark pair (bench/results): 8 experts, top 2, of FFN 1024,
    // against a dense model of the same active parameters (FFN 2048).
    v.push_back({"bench-moe", 4096, 512, 4, 8, 4, 64, 1024, 4096, 10000.0f, 1e-5f, false, 0.0f, 8192, "llama", 0, 0,
                 8, 2, 0});
    v.push_back({"bench-moe-dense", 4096, 512, 4, 8, 4, 64, 2048, 4096, 10000.0f, 1e-5f, false, 0.0f, 8192, "llama"});
    // Qwen2-MoE: q/k/v biases, 4 experts (top 2, not renormalised) and a
    // gated shared expert.
    {
      SynthShape q{"tiny-qwen2moe", 300, 64, 2, 4, 2, 16, 256, 4096, 1000000.0f, 1e-6f, false, 0.0f, 8192, "qwen2moe"};
      q.n_expert = 4;
      q.n_expert_used = 2;
      q.n_ff_exp = 96;
      q.n_ff_shexp = 128;
      v.push_back(q);
    }
    // Encoders (synth_bert.cpp): vocabulary 300 (WordPiece), 4 heads of 16,
    // 2 layers, 512 positions; mean pooling, and a reranker with a
    // one-output classifier head and rank pooling.
    {
      SynthShape b{"tiny-bert", 300, 64, 2, 4, 4, 16, 128, 512, 10000.0f, 1e-12f, false, 0.0f, 8192, "bert"};
      v.push_back(b);
      SynthShape base = b;  // BERT-base (BGE-base, E5-base): for bench/embed_bench.py
      base.name = "bert-base";
      base.n_vocab = 30522;
      base.n_embd = 768;
      base.n_layer = 12;
      base.n_head = base.n_head_kv = 12;
      base.head_dim = 64;
      base.n_ff = 3072;
      v.push_back(base);
      b.name = "tiny-bert-rerank";
      b.pooling = 4;
      b.n_cls_out = 1;
      v.push_back(b);
      // nomic-embed-text v1.5's block (synth_bert.cpp): RoPE (base 1000),
      // fused attn_qkv, SwiGLU, no biases; mean pooling, WordPiece.
      SynthShape nomic{"tiny-nomic-bert", 300, 64, 2, 4, 4, 16, 128, 512, 1000.0f, 1e-12f, false, 0.0f, 8192,
                       "nomic-bert"};
      v.push_back(nomic);
      // XLM-RoBERTa (BGE-M3, multilingual-E5): the BERT block with one
      // token-type row and the Unigram vocabulary given by --vocab-from
      // (a `t5` tokenizer, as llama.cpp's converter writes XLM-R's); CLS
      // pooling as BGE-M3, and BGE-reranker-v2-m3's classifier head.
      SynthShape x = b;
      x.name = "tiny-xlmr";
      x.pooling = 2;
      x.n_cls_out = 0;
      x.n_token_types = 1;
      x.vocab_required = true;
      v.push_back(x);
      x.name = "tiny-xlmr-rerank";
      x.pooling = 4;
      x.n_cls_out = 1;
      v.push_back(x);
    }
    // Decoder embedding models: Qwen3-Embedding (last-token pooling, EOS
    // appended) and Qwen3-Reranker (rank: the [yes, no] head, softmax), on
    // tiny-qwen3's block; and Qwen3-Embedding-0.6B's shape for
    // bench/embed_bench.py (28 layers of 1024, 16 heads of 128 over 8 KV
    // heads, FFN 3072; the synthetic 300-token vocabulary).
    {
      SynthShape q{"tiny-qwen3-embed", 300, 64, 2, 4, 2, 32, 128, 4096, 1000000.0f, 1e-6f, true, 0.0f, 8192, "qwen3"};
      q.decoder_pooling = 3;
      v.push_back(q);
      SynthShape big = q;
      big.name = "qwen3-embed-0.6b";
      big.n_embd = 1024;
      big.n_layer = 28;
      big.n_head = 16;
      big.n_head_kv = 8;
      big.head_dim = 128;
      big.n_ff = 3072;
      big.n_ctx = 32768;
      v.push_back(big);
      q.name = "tiny-qwen3-rerank";
      q.decoder_pooling = 4;
      q.n_cls_out = 2;
      v.push_back(q);
    }
    // gpt-oss: 4 layers (even ones local, window 32 under the 96-token
    // prompt), 4 query heads of 32 over 2 KV heads (q_dim 128 != n_embd, as
    // gpt-oss's 64 x 64 over 2880), YaRN factor 32 on every layer (original
    // context 64), attention sinks, biases, 32 experts of FFN 64, top 4, in
    // MXFP4 as its files ship them.
    {
      SynthShape g{"tiny-gpt-oss", 300, 64, 4, 4, 2, 32, 64, 4096, 150000.0f, 1e-5f, false, 0.0f, 8192, "gpt-oss", 32};
      g.n_expert = 32;
      g.n_expert_used = 4;
      g.n_ff_exp = 64;
      g.yarn_factor = 32.0f;
      g.yarn_original_ctx = 64;
      v.push_back(g);
      g.name = "tiny-gpt-oss-plain";  // the same with F32 (--type) experts
      g.plain_experts = true;
      v.push_back(g);
    }
    // EmbeddingGemma (`gemma-embedding`): tiny-gemma3's block run
    // bidirectionally, 4 layers alternating local (a symmetric window of 32:
    // 16 keys either side) and global, mean pooling, then the dense_2 /
    // dense_3 projections (64 -> 128 -> 64).
    {
      SynthShape g{"tiny-gemma-embed", 300, 64, 4, 4, 1, 32, 128, 2048, 1000000.0f, 1e-6f, true, 0.0f, 8192,
                   "gemma-embedding", 32};
      g.swa_pattern = 2;
      g.decoder_pooling = 1;
      g.n_dense = 128;
      v.push_back(g);
    }
    v.push_back({"tiny-qwen3moe", 300, 64, 2, 4, 2, 32, 256, 4096, 1000000.0f, 1e-6f, true, 0.0f, 8192, "qwen3moe", 0,
                 0, 4, 2, 96});
    // qwen3moe wide enough for K-quant blocks (rows of 256): with --type
    // q4_k_m its experts are Q4_K (gate, up) and Q6_K (down), the CUDA MoE
    // tests' quantized case; 8 experts, top 2.
    v.push_back({"tiny-qwen3moe-k", 300, 256, 2, 4, 2, 64, 256, 4096, 1000000.0f, 1e-6f, true, 0.0f, 8192, "qwen3moe",
                 0, 0, 8, 2, 256});
    // Qwen3-30B-A3B's shape (48 layers of 2048, 32 query heads of 128 over 4
    // KV heads, 128 experts of 768, top 8; the synthetic 300-token
    // vocabulary): the GPU check's MoE decode benchmark, Q4_K_M ~16 GiB.
    v.push_back({"qwen3-30b-a3b", 300, 2048, 48, 32, 4, 128, 6144, 40960, 1000000.0f, 1e-6f, false, 0.0f, 8192,
                 "qwen3moe", 0, 0, 128, 8, 768});
    return v;
  }();
  return shapes;
}

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// n values ~ N(0, sd) (Box-Muller over a SplitMix stream seeded by `key`).
void Normals(uint64_t key, int64_t n, float sd, float* out) {
  uint64_t s = SplitMix(key);
  for (int64_t i = 0; i < n; i += 2) {
    s = SplitMix(s);
    const double u1 = (static_cast<double>(s >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    s = SplitMix(s);
    const double u2 = static_cast<double>(s >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1)) * sd;
    out[i] = static_cast<float>(r * std::cos(2.0 * M_PI * u2));
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(2.0 * M_PI * u2));
  }
}

void Encode(TensorType t, const float* src, int64_t n, char* dst) {
  if (t == TensorType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    return;
  }
  uint16_t* d = reinterpret_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = t == TensorType::F16 ? F32ToF16(src[i]) : F32ToBf16(src[i]);
}

struct TensorPlan {
  std::string name;
  TensorType type;
  std::vector<int64_t> dims;
  enum Fill { kRandom, kOnes, kRopeFreqs, kBias, kQkNorm, kRopeLong, kRopeShort, kSinks } fill;
};

// A tensor's random stream is keyed by its name, so leaving one tensor out
// (drop_rope_freqs) changes no other.
uint64_t NameKey(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

// llama.cpp's rope_freqs for Llama 3.1 scaling: the factor each pair's
// frequency is divided by.
std::vector<float> RopeFactors(const SynthShape& s) {
  std::vector<float> f(s.head_dim / 2);
  const double low_wavelen = s.llama3_original_ctx / 1.0, high_wavelen = s.llama3_original_ctx / 4.0;
  for (int i = 0; i < s.head_dim / 2; ++i) {
    const double freq = std::pow(static_cast<double>(s.rope_theta), -2.0 * i / s.head_dim);
    const double wavelen = 2.0 * M_PI / freq;
    if (wavelen < high_wavelen) {
      f[i] = 1.0f;
    } else if (wavelen > low_wavelen) {
      f[i] = s.llama3_factor;
    } else {
      const double smooth = (s.llama3_original_ctx / wavelen - 1.0) / (4.0 - 1.0);
      f[i] = static_cast<float>(1.0 / ((1.0 - smooth) / s.llama3_factor + smooth));
    }
  }
  return f;
}

// `specials`: control tokens that end the vocabulary (a runtime may look
// its family's up by text: llama.cpp does Phi-3's <|end|>).
void SyntheticVocab(int32_t n_vocab, GgufStreamWriter* w, const std::vector<std::string>& specials = {}) {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens = {"<unk>", "<s>", "</s>"};
  scores = {0.0f, 0.0f, 0.0f};
  types = {2, 3, 3};  // unknown, control, control
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256 && static_cast<int32_t>(tokens.size()) < n_vocab; ++b) {
    tokens.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
    scores.push_back(0.0f);
    types.push_back(6);  // byte
  }
  const int32_t n_plain = n_vocab - static_cast<int32_t>(specials.size());
  for (int32_t i = static_cast<int32_t>(tokens.size()); i < n_plain; ++i) {
    tokens.push_back("\xE2\x96\x81t" + std::to_string(i));  // "▁t<i>"
    scores.push_back(-static_cast<float>(i));
    types.push_back(1);
  }
  for (const std::string& t : specials) {
    tokens.push_back(t);
    scores.push_back(0.0f);
    types.push_back(3);  // control
  }
  std::vector<std::string_view> views(tokens.begin(), tokens.end());
  w->AddString("tokenizer.ggml.model", "llama");
  w->AddStringArray("tokenizer.ggml.tokens", views);
  w->AddFloatArray("tokenizer.ggml.scores", scores);
  w->AddInt32Array("tokenizer.ggml.token_type", types);
  w->AddUint32("tokenizer.ggml.bos_token_id", 1);
  w->AddUint32("tokenizer.ggml.eos_token_id", 2);
  w->AddUint32("tokenizer.ggml.unknown_token_id", 0);
  w->AddBool("tokenizer.ggml.add_bos_token", true);
  w->AddBool("tokenizer.ggml.add_eos_token", false);
}

// A byte-level BPE vocabulary as Qwen's converter writes it (GPT-2 style,
// pre-tokenizer "qwen2"): the 256 byte tokens in GPT-2's byte-to-unicode
// spelling (id = byte), two-character merges of common English pairs, then
// Qwen's control tokens at the end.
void Gpt2Vocab(int32_t n_vocab, GgufStreamWriter* w, bool think_tokens, bool harmony_tokens) {
  std::vector<std::string> byte_tok(256);
  {
    std::vector<int> bs, cs;
    for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
    for (int b = 0xA1; b <= 0xAC; ++b) bs.push_back(b);
    for (int b = 0xAE; b <= 0xFF; ++b) bs.push_back(b);
    cs = bs;
    for (int b = 0, n = 0; b < 256; ++b)
      if (std::find(bs.begin(), bs.end(), b) == bs.end()) bs.push_back(b), cs.push_back(256 + n++);
    for (size_t i = 0; i < bs.size(); ++i) {
      const int c = cs[i];
      std::string u;
      if (c < 0x80) {
        u = static_cast<char>(c);
      } else {  // two-byte UTF-8 (c < 0x800)
        u += static_cast<char>(0xC0 | (c >> 6));
        u += static_cast<char>(0x80 | (c & 0x3F));
      }
      byte_tok[bs[i]] = u;
    }
  }
  static const char* const kPairs[][2] = {
      {" ", "t"}, {" ", "a"}, {"h", "e"}, {"i", "n"}, {"t", "h"}, {"e", "r"}, {"a", "n"}, {"o", "n"}, {"r", "e"},
      {" ", "s"}, {" ", "o"}, {" ", "w"}, {"e", "n"}, {"a", "t"}, {"o", "r"}, {" ", "c"}, {"e", "s"}, {" ", "f"},
      {"i", "s"}, {"i", "t"}, {" ", "b"}, {" ", "p"}, {"a", "r"}, {"o", "u"}, {" ", "m"}, {"l", "e"}, {" ", "h"},
      {"a", "l"}, {" ", "d"}, {"e", "d"}, {"i", "c"}, {" ", "i"}, {"s", "t"}, {" ", "l"}, {"a", "s"}, {" ", "n"},
      {"o", "m"}, {"r", "o"}, {" ", "T"}, {" ", "C"}, {" ", "F"}};
  static const char* const kSpecials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  std::vector<std::string> tokens(byte_tok), merges;
  std::vector<int32_t> types(256, 1);
  const int32_t n_merges = n_vocab - 256 - 3 - (think_tokens ? 2 : 0) - (harmony_tokens ? 4 : 0);
  for (int32_t i = 0; i < n_merges && i < static_cast<int32_t>(std::size(kPairs)); ++i) {
    const std::string a = byte_tok[static_cast<unsigned char>(kPairs[i][0][0])];
    const std::string b = byte_tok[static_cast<unsigned char>(kPairs[i][1][0])];
    merges.push_back(a + " " + b);
    tokens.push_back(a + b);
    types.push_back(1);
  }
  if (think_tokens)
    for (const char* t : {"<think>", "</think>"}) {
      tokens.push_back(t);
      types.push_back(4);  // user-defined
    }
  if (harmony_tokens)
    for (const char* t : {"<|start|>", "<|channel|>", "<|message|>", "<|end|>"}) {
      tokens.push_back(t);
      types.push_back(3);  // control
    }
  for (const char* t : kSpecials) {
    tokens.push_back(t);
    types.push_back(3);  // control
  }
  const uint32_t eos = static_cast<uint32_t>(tokens.size() - 3);  // <|endoftext|>
  std::vector<std::string_view> tv(tokens.begin(), tokens.end()), mv(merges.begin(), merges.end());
  w->AddString("tokenizer.ggml.model", "gpt2");
  w->AddString("tokenizer.ggml.pre", "qwen2");
  w->AddStringArray("tokenizer.ggml.tokens", tv);
  w->AddInt32Array("tokenizer.ggml.token_type", types);
  w->AddStringArray("tokenizer.ggml.merges", mv);
  w->AddUint32("tokenizer.ggml.bos_token_id", eos);
  w->AddUint32("tokenizer.ggml.eos_token_id", eos);
  w->AddUint32("tokenizer.ggml.padding_token_id", eos);
  w->AddBool("tokenizer.ggml.add_bos_token", false);
}

}  // namespace

const SynthShape* FindSynthShape(std::string_view name) {
  for (const SynthShape& s : Shapes())
    if (s.name == name) return &s;
  return nullptr;
}

std::vector<std::string> SynthShapeNames() {
  std::vector<std::string> v;
  for (const SynthShape& s : Shapes()) v.push_back(s.name);
  return v;
}

void SynthNormals(uint64_t key, int64_t n, float sd, float* out) { Normals(key, n, sd, out); }
uint64_t SynthNameKey(const std::string& name) { return NameKey(name); }
void SynthEncode(TensorType t, const float* src, int64_t n, char* dst) { Encode(t, src, n, dst); }

int64_t SynthParams(const SynthShape& s, int32_t n_vocab) {
  const int64_t E = s.n_embd, Q = int64_t{s.n_head} * s.head_dim, KV = int64_t{s.n_head_kv} * s.head_dim, F = s.n_ff;
  int64_t per_layer = 2 * E + E * Q + 2 * E * KV + Q * E + 3 * E * F;
  if (s.arch == "qwen2") per_layer += Q + 2 * KV;
  if (s.arch == "qwen3") per_layer += 2 * s.head_dim;
  if (s.arch == "gemma2") per_layer += 2 * E;
  if (s.arch == "gemma3" || s.arch == "gemma-embedding") per_layer += 2 * E + 2 * s.head_dim;
  if (s.arch == "qwen3moe") per_layer += 2 * s.head_dim;
  if (s.arch == "gpt-oss") {  // biases, sinks; post_attention_norm replaces ffn_norm
    const int64_t FE = s.n_ff_exp;
    per_layer += Q + 2 * KV + E + s.n_head + s.n_expert * (1 + 2 * FE + E);
  }
  if (s.n_expert > 0) {
    const int64_t FE = s.n_ff_exp > 0 ? s.n_ff_exp : F;
    per_layer += s.n_expert * E + s.n_expert * 3 * E * FE - 3 * E * F;
    if (s.n_ff_shexp > 0) per_layer += E + 3 * E * s.n_ff_shexp;
  }
  return n_vocab * E * (s.tied_embeddings ? 1 : 2) + E + s.n_layer * per_layer + 2 * E * int64_t{s.n_dense};
}

Status WriteSynthModel(const SynthShape& s, const SynthOptions& o, const std::string& path) {
  if (o.type != TensorType::F32 && o.type != TensorType::F16 && o.type != TensorType::BF16)
    return InvalidArgument("llm-synth: weight type must be F32, F16 or BF16");
  if (s.arch == "bert" || s.arch == "nomic-bert") return WriteSynthBert(s, o, path);
  // Q4_K_M: dense llama shapes and every MoE shape (llama.cpp's rules name
  // the experts' tensors too); the low-bit and lattice mixes: dense llama.
  if (o.q4_k_m && s.arch != "llama" && s.n_expert == 0)
    return InvalidArgument("llm-synth: the Q4_K_M mix is written for llama and MoE shapes only");
  if ((o.low_bit || o.iq_mix) && (s.arch != "llama" || s.n_expert > 0))
    return InvalidArgument("llm-synth: the low-bit and lattice mixes are written for dense llama shapes only");
  if (int{o.q4_k_m} + int{o.low_bit} + int{o.iq_mix} > 1)
    return InvalidArgument("llm-synth: one quantized mix at a time");
  int32_t n_vocab = s.n_vocab;
  if (o.vocab != nullptr) {
    const auto n = o.vocab->ArrayLength("tokenizer.ggml.tokens");
    if (!n || *n == 0) return InvalidArgument("llm-synth: the vocabulary file has no tokenizer.ggml.tokens");
    n_vocab = static_cast<int32_t>(*n);
  } else if (n_vocab < 259) {
    return InvalidArgument("llm-synth: a synthetic vocabulary needs at least 259 tokens");
  } else if ((s.arch.rfind("qwen", 0) == 0 || o.bpe_vocab) && n_vocab != 256 + 41 + 3) {
    return InvalidArgument("llm-synth: the synthetic Qwen vocabulary has 300 tokens");
  }

  if (s.arch != "llama" && s.arch != "qwen2" && s.arch != "qwen3" && s.arch != "gemma2" && s.arch != "phi3" &&
      s.arch != "qwen3moe" && s.arch != "qwen2moe" && s.arch != "gemma3" && s.arch != "gemma-embedding" &&
      s.arch != "gpt-oss" && s.arch != "qwen2vl")
    return InvalidArgument("llm-synth: unknown family '" + s.arch + "'");
  const bool qwen2 = s.arch == "qwen2" || s.arch == "qwen2moe" || s.arch == "qwen2vl", qwen3 = s.arch == "qwen3" || s.arch == "qwen3moe";
  // Gemma 3 is Gemma 2's block (post-norms) with q/k norms, no attention cap.
  // EmbeddingGemma is Gemma 3's block too (bidirectional: llama.cpp's
  // reading of the arch, nothing in the file says it).
  const bool gemma_embed = s.arch == "gemma-embedding";
  const bool gemma3 = s.arch == "gemma3" || gemma_embed, gemma2 = s.arch == "gemma2" || gemma3;
  const bool moe = s.n_expert > 0;
  const bool phi3 = s.arch == "phi3";
  // gpt-oss: biases on q/k/v/o, the router and the experts; attention
  // sinks; the pre-FFN norm named post_attention_norm; MXFP4 experts.
  const bool gpt_oss = s.arch == "gpt-oss";
  if (gpt_oss && (!moe || (o.q4_k_m || o.low_bit || o.iq_mix)))
    return InvalidArgument("llm-synth: a gpt-oss shape has experts and its own MXFP4 types");
  const int32_t rope_dim = s.rope_dim > 0 ? s.rope_dim : s.head_dim;

  GgufStreamWriter w;
  const std::string a = s.arch + ".";
  w.AddString("general.architecture", s.arch);
  w.AddString("general.name", "synth-" + s.name);
  w.AddUint32("general.file_type",
              gpt_oss && !s.plain_experts ? 38 : o.q4_k_m ? 15 : o.low_bit ? 30 : o.iq_mix ? 23 : o.type == TensorType::F32 ? 0 : o.type == TensorType::F16 ? 1 : 32);  // 15: MOSTLY_Q4_K_M, 30: MOSTLY_IQ4_XS, 23: MOSTLY_IQ3_XXS, 38: MOSTLY_MXFP4_MOE
  w.AddUint32(a + "context_length", static_cast<uint32_t>(s.n_ctx));
  w.AddUint32(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
  w.AddUint32(a + "block_count", static_cast<uint32_t>(s.n_layer));
  w.AddUint32(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.AddUint32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
  w.AddUint32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.AddUint32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim));
  w.AddUint32(a + "attention.value_length", static_cast<uint32_t>(s.head_dim));
  w.AddUint32(a + "rope.dimension_count", static_cast<uint32_t>(rope_dim));
  w.AddFloat32(a + "rope.freq_base", s.rope_theta);
  w.AddFloat32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.AddUint32(a + "vocab_size", static_cast<uint32_t>(n_vocab));
  if (s.sliding_window > 0) w.AddUint32(a + "attention.sliding_window", static_cast<uint32_t>(s.sliding_window));
  if (s.arch == "qwen2vl") {  // M-RoPE: pairs per (t, h, w, unused) position id, t first
    const int32_t pairs = rope_dim / 2, t = pairs / 4, hw = (pairs - t) / 2;
    w.AddInt32Array(a + "rope.dimension_sections", {t, hw, pairs - t - hw, 0});
  }
  if (s.yarn_factor > 0.0f) {
    w.AddString(a + "rope.scaling.type", "yarn");
    w.AddFloat32(a + "rope.scaling.factor", s.yarn_factor);
    w.AddUint32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(s.yarn_original_ctx));
  }
  if (s.longrope_original_ctx > 0) {
    const double orig = s.longrope_original_ctx, scale = s.n_ctx / orig;
    w.AddUint32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(s.longrope_original_ctx));
    w.AddFloat32(a + "rope.scaling.attn_factor",
                 scale > 1.0 ? static_cast<float>(std::sqrt(1.0 + std::log(scale) / std::log(orig))) : 1.0f);
  }
  if (moe) {
    w.AddUint32(a + "expert_count", static_cast<uint32_t>(s.n_expert));
    w.AddUint32(a + "expert_used_count", static_cast<uint32_t>(s.n_expert_used));
    if (s.n_ff_exp > 0) w.AddUint32(a + "expert_feed_forward_length", static_cast<uint32_t>(s.n_ff_exp));
    if (s.n_ff_shexp > 0)
      w.AddUint32(a + "expert_shared_feed_forward_length", static_cast<uint32_t>(s.n_ff_shexp));
  }
  if (gemma2 && !gemma3) {
    // Gemma 2's keys; caps far below its 50 / 30 so that the tiny model's
    // scores and logits reach them (a cap they never reach tests nothing).
    w.AddFloat32(a + "attn_logit_softcapping", 5.0f);
    w.AddFloat32(a + "final_logit_softcapping", 4.0f);
  }
  if (gemma3) w.AddFloat32(a + "rope.freq_base_swa", 10000.0f);  // local layers' base (global: rope_theta)
  if (s.swa_pattern > 0) w.AddUint32(a + "attention.sliding_window_pattern", static_cast<uint32_t>(s.swa_pattern));
  if (s.n_dense > 0) {  // EmbeddingGemma's converter with --sentence-transformers-dense-modules
    w.AddUint32(a + "dense_2_feat_in", static_cast<uint32_t>(s.n_embd));
    w.AddUint32(a + "dense_2_feat_out", static_cast<uint32_t>(s.n_dense));
    w.AddUint32(a + "dense_3_feat_in", static_cast<uint32_t>(s.n_dense));
    w.AddUint32(a + "dense_3_feat_out", static_cast<uint32_t>(s.n_embd));
  }
  if (s.decoder_pooling > 0) {
    w.AddUint32(a + "pooling_type", static_cast<uint32_t>(s.decoder_pooling));
    if (s.n_cls_out > 0) {
      std::vector<std::string_view> labels = {"yes", "no"};
      labels.resize(static_cast<size_t>(s.n_cls_out), "label");
      w.AddStringArray(a + "classifier.output_labels", labels);
    }
  }
  if (o.vocab != nullptr) {
    for (std::string_view key : o.vocab->keys())
      if (key.rfind("tokenizer.", 0) == 0 && !w.CopyKey(*o.vocab, key))
        return Unsupported("llm-synth: cannot copy metadata key " + std::string(key));
  } else if (s.arch.rfind("qwen", 0) == 0 || o.bpe_vocab) {
    Gpt2Vocab(n_vocab, &w, o.think_tokens, o.harmony_tokens);
  } else {
    std::vector<std::string> specials;
    if (phi3) specials = {"<|endoftext|>", "<|assistant|>", "<|system|>", "<|end|>", "<|user|>"};
    if (s.name == "tiny-llava") specials = {"<image>"};
    if (s.name == "tiny-smolvlm") {  // Idefics3's layout tokens (image_tokens.h), for grids up to 3 x 3
      specials = {"<image>", "<fake_token_around_image>", "<global-img>", "\n\n", "<end_of_utterance>"};
      for (int r = 1; r <= 3; ++r)
        for (int c = 1; c <= 3; ++c) specials.push_back("<row_" + std::to_string(r) + "_col_" + std::to_string(c) + ">");
    }
    SyntheticVocab(n_vocab, &w, specials);
  }
  if (s.decoder_pooling == 3 && o.vocab == nullptr) w.AddBool("tokenizer.ggml.add_eos_token", true);
  if (s.decoder_pooling == 4 && o.vocab == nullptr) {
    // Qwen3-Reranker's prompt, as llama.cpp's converter writes it.
    w.AddString("tokenizer.chat_template.rerank",
                "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
                "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
                "<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that answer the "
                "query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n"
                "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  }
  if (!o.chat_template.empty()) {
    if (o.vocab != nullptr && o.vocab->Has("tokenizer.chat_template"))
      return InvalidArgument("llm-synth: --chat-template and a --vocab-from file that has one");
    w.AddString("tokenizer.chat_template", o.chat_template);
  }

  // ---- tensors (GGUF dims: ne0 = input features, the fastest)
  const int64_t E = s.n_embd, Q = int64_t{s.n_head} * s.head_dim, KV = int64_t{s.n_head_kv} * s.head_dim, F = s.n_ff;
  std::vector<TensorPlan> plan;
  plan.push_back({"token_embd.weight", o.type, {E, n_vocab}, TensorPlan::kRandom});
  plan.push_back({"output_norm.weight", TensorType::F32, {E}, TensorPlan::kOnes});
  if (!s.tied_embeddings) plan.push_back({"output.weight", o.type, {E, n_vocab}, TensorPlan::kRandom});
  if (s.decoder_pooling > 0 && s.n_cls_out > 0) plan.push_back({"cls.output.weight", o.type, {E, s.n_cls_out}, TensorPlan::kRandom});
  if (s.n_dense > 0) {
    plan.push_back({"dense_2.weight", o.type, {E, s.n_dense}, TensorPlan::kRandom});
    plan.push_back({"dense_3.weight", o.type, {s.n_dense, E}, TensorPlan::kRandom});
  }
  if (s.llama3_factor > 0.0f && !o.drop_rope_freqs) plan.push_back({"rope_freqs.weight", TensorType::F32, {s.head_dim / 2}, TensorPlan::kRopeFreqs});
  if (s.longrope_original_ctx > 0) {
    plan.push_back({"rope_factors_long.weight", TensorType::F32, {rope_dim / 2}, TensorPlan::kRopeLong});
    plan.push_back({"rope_factors_short.weight", TensorType::F32, {rope_dim / 2}, TensorPlan::kRopeShort});
  }
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    plan.push_back({p + "attn_norm.weight", TensorType::F32, {E}, TensorPlan::kOnes});
    if (phi3) {
      plan.push_back({p + "attn_qkv.weight", o.type, {E, Q + 2 * KV}, TensorPlan::kRandom});
    } else {
      plan.push_back({p + "attn_q.weight", o.type, {E, Q}, TensorPlan::kRandom});
      plan.push_back({p + "attn_k.weight", o.type, {E, KV}, TensorPlan::kRandom});
      plan.push_back({p + "attn_v.weight", o.type, {E, KV}, TensorPlan::kRandom});
    }
    if (qwen2 || gpt_oss) {
      plan.push_back({p + "attn_q.bias", TensorType::F32, {Q}, TensorPlan::kBias});
      plan.push_back({p + "attn_k.bias", TensorType::F32, {KV}, TensorPlan::kBias});
      plan.push_back({p + "attn_v.bias", TensorType::F32, {KV}, TensorPlan::kBias});
    }
    if (qwen3 || gemma3) {
      plan.push_back({p + "attn_q_norm.weight", TensorType::F32, {s.head_dim}, TensorPlan::kQkNorm});
      plan.push_back({p + "attn_k_norm.weight", TensorType::F32, {s.head_dim}, TensorPlan::kQkNorm});
    }
    plan.push_back({p + "attn_output.weight", o.type, {Q, E}, TensorPlan::kRandom});
    if (gpt_oss) {
      plan.push_back({p + "attn_output.bias", TensorType::F32, {E}, TensorPlan::kBias});
      plan.push_back({p + "attn_sinks.weight", TensorType::F32, {s.n_head}, TensorPlan::kSinks});
    }
    if (gemma2 || gpt_oss) plan.push_back({p + "post_attention_norm.weight", TensorType::F32, {E}, TensorPlan::kOnes});
    if (!gpt_oss) plan.push_back({p + "ffn_norm.weight", TensorType::F32, {E}, TensorPlan::kOnes});
    if (moe) {
      const int64_t NE = s.n_expert, FE = s.n_ff_exp > 0 ? s.n_ff_exp : F;
      const TensorType et = gpt_oss && !s.plain_experts ? TensorType::MXFP4 : o.type;
      plan.push_back({p + "ffn_gate_inp.weight", o.type, {E, NE}, TensorPlan::kRandom});
      plan.push_back({p + "ffn_gate_exps.weight", et, {E, FE, NE}, TensorPlan::kRandom});
      plan.push_back({p + "ffn_down_exps.weight", et, {FE, E, NE}, TensorPlan::kRandom});
      plan.push_back({p + "ffn_up_exps.weight", et, {E, FE, NE}, TensorPlan::kRandom});
      if (gpt_oss) {
        plan.push_back({p + "ffn_gate_inp.bias", TensorType::F32, {NE}, TensorPlan::kBias});
        plan.push_back({p + "ffn_gate_exps.bias", TensorType::F32, {FE, NE}, TensorPlan::kBias});
        plan.push_back({p + "ffn_down_exps.bias", TensorType::F32, {E, NE}, TensorPlan::kBias});
        plan.push_back({p + "ffn_up_exps.bias", TensorType::F32, {FE, NE}, TensorPlan::kBias});
      }
      if (s.n_ff_shexp > 0) {
        const int64_t FS = s.n_ff_shexp;
        plan.push_back({p + "ffn_gate_inp_shexp.weight", TensorType::F32, {E}, TensorPlan::kBias});
        plan.push_back({p + "ffn_gate_shexp.weight", o.type, {E, FS}, TensorPlan::kRandom});
        plan.push_back({p + "ffn_down_shexp.weight", o.type, {FS, E}, TensorPlan::kRandom});
        plan.push_back({p + "ffn_up_shexp.weight", o.type, {E, FS}, TensorPlan::kRandom});
      }
    } else {
      if (!phi3) plan.push_back({p + "ffn_gate.weight", o.type, {E, F}, TensorPlan::kRandom});
      plan.push_back({p + "ffn_down.weight", o.type, {F, E}, TensorPlan::kRandom});
      plan.push_back({p + "ffn_up.weight", o.type, {E, phi3 ? 2 * F : F}, TensorPlan::kRandom});  // phi3: gate, up
    }
    if (gemma2) plan.push_back({p + "post_ffw_norm.weight", TensorType::F32, {E}, TensorPlan::kOnes});
  }
  if (o.q4_k_m || o.low_bit || o.iq_mix) {
    for (TensorPlan& t : plan) {
      if (t.fill != TensorPlan::kRandom) continue;
      const int layer = t.name.rfind("blk.", 0) == 0 ? std::atoi(t.name.c_str() + 4) : -1;
      t.type = o.low_bit  ? LowBitType(t.name, t.dims[0])
               : o.iq_mix ? IQMixType(t.name, t.dims[0])
                          : Q4KMType(t.name, layer, s.n_layer, t.dims[0]);
    }
  }
  for (const TensorPlan& t : plan) w.AddTensor(t.name, t.type, t.dims);
  LLM_RETURN_IF_ERROR(w.Begin(path));

  // ---- data: fixed chunks with their own seeds, generated in parallel
  constexpr int64_t kChunk = int64_t{1} << 20;
  const int n_threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::vector<float>> f32(n_threads, std::vector<float>(kChunk));
  std::vector<std::vector<char>> enc(n_threads, std::vector<char>(kChunk * 4));
  for (size_t ti = 0; ti < plan.size(); ++ti) {
    const TensorPlan& t = plan[ti];
    int64_t n = 1;
    for (int64_t d : t.dims) n *= d;
    const uint64_t key = o.seed * 0x100000001b3ull ^ NameKey(t.name);
    if (t.fill != TensorPlan::kRandom) {
      std::vector<float> v;
      if (t.fill == TensorPlan::kRopeFreqs) {
        v = RopeFactors(s);
      } else if (t.fill == TensorPlan::kRopeLong || t.fill == TensorPlan::kRopeShort) {
        // Phi-3.5's shapes: long factors rising from 1 to ~8 over the pairs,
        // short ones near 1; different enough that the wrong pick shows.
        v.resize(n);
        for (int64_t i = 0; i < n; ++i)
          v[i] = 1.0f + static_cast<float>(i) * (t.fill == TensorPlan::kRopeLong ? 0.6f : 0.02f);
      } else if (t.fill == TensorPlan::kBias) {
        v.resize(n);
        Normals(key, n, o.bias_std, v.data());
      } else if (t.fill == TensorPlan::kSinks) {
        // Attention sinks ~ 4 + N(0, 2): logits of the size of the tiny
        // model's larger attention scores, so a sink takes a visible share
        // of its head's softmax (as trained gpt-oss sinks do on some heads).
        v.resize(n);
        Normals(key, n, 2.0f, v.data());
        for (float& x : v) x += 4.0f;
      } else {
        // q/k norm weights of 2: normed heads have q·k / sqrt(head_dim) of
        // unit spread, near-uniform attention; trained Qwen3 models learn
        // weights well above 1, and 2 gives scores of spread ~4.
        v.assign(n, t.fill == TensorPlan::kQkNorm ? 2.0f : 1.0f);
        if (o.norm_std > 0.0f) {
          std::vector<float> d(n);
          Normals(key, n, o.norm_std, d.data());
          for (int64_t i = 0; i < n; ++i) v[i] += v[i] * d[i];
        }
      }
      LLM_RETURN_IF_ERROR(w.Write(v.data(), v.size() * sizeof(float)));
      continue;
    }
    const int64_t n_chunks = (n + kChunk - 1) / kChunk;
    for (int64_t c0 = 0; c0 < n_chunks; c0 += n_threads) {
      const int batch = static_cast<int>(std::min<int64_t>(n_threads, n_chunks - c0));
      auto work = [&](int j) {
        const int64_t c = c0 + j, len = std::min(kChunk, n - c * kChunk);
        Normals(key ^ (static_cast<uint64_t>(c) << 40), len, o.stddev, f32[j].data());
        if (o.q4_k_m || o.low_bit || o.iq_mix || t.type == TensorType::MXFP4) {
          EncodeQuant(t.type, f32[j].data(), len, o.stddev, enc[j].data());
        } else {
          Encode(t.type, f32[j].data(), len, enc[j].data());
        }
      };
      std::vector<std::thread> pool;
      for (int j = 1; j < batch; ++j) pool.emplace_back(work, j);
      work(0);
      for (auto& th : pool) th.join();
      for (int j = 0; j < batch; ++j) {
        const int64_t len = std::min(kChunk, n - (c0 + j) * kChunk);
        LLM_RETURN_IF_ERROR(w.Write(enc[j].data(), EncodedBytes(t.type, len)));
      }
    }
  }
  return w.Finish();
}

}  // namespace llm::synth
