// llm-synth's `bert` family: a GGUF as llama.cpp's converter writes a BERT
// embedding model (BGE, E5, MiniLM) or cross-encoder, with random weights
// scaled so that the tiny model is far from trivial: q/k weights give
// attention scores of spread ~2-3 (sharp, so a wrong mask shows), LayerNorm
// weights and biases are not 1 and 0, the token-type row is not zero.
// `nomic-bert` (nomic-embed-text v1.5) is written as its converter does: no
// position_embd, attn_qkv, ffn_gate, no biases, rope.freq_base. An
// XLM-RoBERTa shape takes its Unigram tokenizer from --vocab-from and, as the
// converter writes XLM-R's (RobertaProcessing), separator </s> with
// add_sep_token when that file says nothing of them.
#include <string>
#include <vector>

#include "gguf_stream_writer.h"
#include "synth_model.h"

namespace llm::synth {
namespace {

// [PAD] [UNK] [CLS] [SEP] [MASK], the letters starting a word, the letters
// continuing one, then whole words "w<i>" up to n_vocab; in llama.cpp's
// GGUF spelling of a WordPiece vocabulary: a word's first piece carries
// "▁" ("▁a", BERT's "a"), a continuation is bare ("a", BERT's "##a").
void WordPieceVocab(int32_t n_vocab, GgufStreamWriter* w) {
  const std::string mark = "\xE2\x96\x81";  // U+2581
  std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  std::vector<int32_t> types = {3, 2, 3, 3, 3};
  for (char c = 'a'; c <= 'z'; ++c) tokens.push_back(mark + c), types.push_back(1);
  for (char c = 'a'; c <= 'z'; ++c) tokens.push_back(std::string(1, c)), types.push_back(1);
  for (int32_t i = static_cast<int32_t>(tokens.size()); i < n_vocab; ++i)
    tokens.push_back(mark + "w" + std::to_string(i)), types.push_back(1);
  std::vector<std::string_view> views(tokens.begin(), tokens.end());
  w->AddString("tokenizer.ggml.model", "bert");
  w->AddString("tokenizer.ggml.pre", "default");
  w->AddStringArray("tokenizer.ggml.tokens", views);
  w->AddInt32Array("tokenizer.ggml.token_type", types);
  w->AddUint32("tokenizer.ggml.token_type_count", 2);
  w->AddUint32("tokenizer.ggml.padding_token_id", 0);
  w->AddUint32("tokenizer.ggml.unknown_token_id", 1);
  w->AddUint32("tokenizer.ggml.cls_token_id", 2);
  w->AddUint32("tokenizer.ggml.bos_token_id", 2);
  w->AddUint32("tokenizer.ggml.seperator_token_id", 3);  // sic: llama.cpp's key
  w->AddUint32("tokenizer.ggml.eos_token_id", 3);
  w->AddUint32("tokenizer.ggml.mask_token_id", 4);
  w->AddBool("tokenizer.ggml.add_bos_token", true);
  w->AddBool("tokenizer.ggml.add_eos_token", true);
}

struct Plan {
  std::string name;
  TensorType type;
  std::vector<int64_t> dims;
  float mean;  // values ~ mean + N(0, sd)
  float sd;
};

}  // namespace

Status WriteSynthBert(const SynthShape& s, const SynthOptions& o, const std::string& path) {
  if (o.q4_k_m || o.bpe_vocab) return InvalidArgument("llm-synth: bert shapes take no --q4_k_m or BPE vocabulary");
  if (s.vocab_required != (o.vocab != nullptr))
    return InvalidArgument(s.vocab_required ? "llm-synth: shape " + s.name + " needs --vocab-from (a Unigram GGUF)"
                                            : "llm-synth: shape " + s.name + " takes no --vocab-from");
  int32_t n_vocab = s.n_vocab;
  if (o.vocab != nullptr) {
    const auto n = o.vocab->ArrayLength("tokenizer.ggml.tokens");
    if (!n || *n == 0 || *n > 1000000) return InvalidArgument("llm-synth: the vocabulary file has no usable tokens");
    n_vocab = static_cast<int32_t>(*n);
  }
  const bool nomic = s.arch == "nomic-bert";
  if (s.n_head != s.n_head_kv || s.n_head * s.head_dim != s.n_embd)
    return InvalidArgument("llm-synth: a bert shape needs n_head_kv == n_head and n_head * head_dim == n_embd");
  GgufStreamWriter w;
  const std::string a = s.arch + ".";
  w.AddString("general.architecture", s.arch);
  w.AddString("general.name", "synth-" + s.name);
  w.AddUint32("general.file_type", o.type == TensorType::F32 ? 0 : o.type == TensorType::F16 ? 1 : 32);
  w.AddUint32(a + "context_length", static_cast<uint32_t>(s.n_ctx));
  w.AddUint32(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
  w.AddUint32(a + "block_count", static_cast<uint32_t>(s.n_layer));
  w.AddUint32(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.AddUint32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
  w.AddFloat32(a + "attention.layer_norm_epsilon", s.rms_eps);
  w.AddBool(a + "attention.causal", false);
  w.AddUint32(a + "pooling_type", static_cast<uint32_t>(s.pooling));
  if (nomic) w.AddFloat32(a + "rope.freq_base", s.rope_theta);
  if (o.vocab != nullptr) {
    for (std::string_view key : o.vocab->keys())
      if (key.rfind("tokenizer.", 0) == 0 && key != "tokenizer.ggml.token_type_count" && !w.CopyKey(*o.vocab, key))
        return InvalidArgument("llm-synth: cannot copy " + std::string(key));
    w.AddUint32("tokenizer.ggml.token_type_count", static_cast<uint32_t>(s.n_token_types));
    if (!o.vocab->Has("tokenizer.ggml.seperator_token_id") && o.vocab->Has("tokenizer.ggml.eos_token_id")) {
      auto eos = o.vocab->GetInt("tokenizer.ggml.eos_token_id");
      if (!eos.ok()) return eos.status();
      w.AddUint32("tokenizer.ggml.seperator_token_id", static_cast<uint32_t>(*eos));  // sic: llama.cpp's key
    }
    if (!o.vocab->Has("tokenizer.ggml.add_sep_token")) w.AddBool("tokenizer.ggml.add_sep_token", true);
  } else {
    WordPieceVocab(n_vocab, &w);
  }

  const int64_t E = s.n_embd, F = s.n_ff, V = n_vocab;
  std::vector<Plan> plan;
  const TensorType f32 = TensorType::F32;
  plan.push_back({"token_embd.weight", o.type, {E, V}, 0.0f, 0.5f});
  // F32 whatever the weight type, as llama.cpp's converter keeps it (its
  // graph adds the row as it is, and ggml's CPU add takes no F16 operand).
  plan.push_back({"token_types.weight", TensorType::F32, {E, s.n_token_types}, 0.0f, 0.5f});
  if (!nomic) plan.push_back({"position_embd.weight", o.type, {E, s.n_ctx}, 0.0f, 0.5f});
  plan.push_back({"token_embd_norm.weight", f32, {E}, 1.0f, 0.1f});
  plan.push_back({"token_embd_norm.bias", f32, {E}, 0.0f, 0.1f});
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    if (nomic) {
      plan.push_back({p + "attn_qkv.weight", o.type, {E, 3 * E}, 0.0f, 0.2f});
      plan.push_back({p + "attn_output.weight", o.type, {E, E}, 0.0f, 0.1f});
      plan.push_back({p + "attn_output_norm.weight", f32, {E}, 1.0f, 0.1f});
      plan.push_back({p + "attn_output_norm.bias", f32, {E}, 0.0f, 0.1f});
      plan.push_back({p + "ffn_up.weight", o.type, {E, F}, 0.0f, 0.15f});
      plan.push_back({p + "ffn_gate.weight", o.type, {E, F}, 0.0f, 0.3f});
      plan.push_back({p + "ffn_down.weight", o.type, {F, E}, 0.0f, 0.1f});
      plan.push_back({p + "layer_output_norm.weight", f32, {E}, 1.0f, 0.1f});
      plan.push_back({p + "layer_output_norm.bias", f32, {E}, 0.0f, 0.1f});
      continue;
    }
    plan.push_back({p + "attn_q.weight", o.type, {E, E}, 0.0f, 0.2f});
    plan.push_back({p + "attn_q.bias", f32, {E}, 0.0f, 0.1f});
    plan.push_back({p + "attn_k.weight", o.type, {E, E}, 0.0f, 0.2f});
    plan.push_back({p + "attn_k.bias", f32, {E}, 0.0f, 0.1f});
    plan.push_back({p + "attn_v.weight", o.type, {E, E}, 0.0f, 0.1f});
    plan.push_back({p + "attn_v.bias", f32, {E}, 0.0f, 0.1f});
    plan.push_back({p + "attn_output.weight", o.type, {E, E}, 0.0f, 0.1f});
    plan.push_back({p + "attn_output.bias", f32, {E}, 0.0f, 0.1f});
    plan.push_back({p + "attn_output_norm.weight", f32, {E}, 1.0f, 0.1f});
    plan.push_back({p + "attn_output_norm.bias", f32, {E}, 0.0f, 0.1f});
    plan.push_back({p + "ffn_up.weight", o.type, {E, F}, 0.0f, 0.15f});
    plan.push_back({p + "ffn_up.bias", f32, {F}, 0.0f, 0.1f});
    plan.push_back({p + "ffn_down.weight", o.type, {F, E}, 0.0f, 0.1f});
    plan.push_back({p + "ffn_down.bias", f32, {E}, 0.0f, 0.1f});
    plan.push_back({p + "layer_output_norm.weight", f32, {E}, 1.0f, 0.1f});
    plan.push_back({p + "layer_output_norm.bias", f32, {E}, 0.0f, 0.1f});
  }
  if (s.n_cls_out > 0) {
    plan.push_back({"cls.weight", o.type, {E, E}, 0.0f, 0.2f});
    plan.push_back({"cls.bias", f32, {E}, 0.0f, 0.1f});
    plan.push_back({"cls.output.weight", o.type, {E, s.n_cls_out}, 0.0f, 0.3f});
    plan.push_back({"cls.output.bias", f32, {s.n_cls_out}, 0.0f, 0.1f});
  }
  for (const Plan& t : plan) w.AddTensor(t.name, t.type, t.dims);
  LLM_RETURN_IF_ERROR(w.Begin(path));
  for (const Plan& t : plan) {
    int64_t n = 1;
    for (int64_t d : t.dims) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    SynthNormals(o.seed * 0x100000001b3ull ^ SynthNameKey(t.name), n, t.sd, v.data());
    for (float& x : v) x += t.mean;
    std::vector<char> bytes(static_cast<size_t>(n) * 4);
    SynthEncode(t.type, v.data(), n, bytes.data());
    LLM_RETURN_IF_ERROR(w.Write(bytes.data(), static_cast<size_t>(n) * (t.type == TensorType::F32 ? 4 : 2)));
  }
  return w.Finish();
}

}  // namespace llm::synth
