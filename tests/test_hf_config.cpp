// ModelConfig::FromHfConfig on the config.json files of real checkpoints
// (copied from their Hugging Face repositories: Llama 3.2 1B, Qwen2.5 0.5B
// Instruct, Qwen3 0.6B, Mistral 7B Instruct v0.3), checked against the
// values llama.cpp's converter writes into their GGUFs; and refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "model/config.h"
#include "util/json.h"

namespace llm {
namespace {

StatusOr<ModelConfig> FromText(const std::string& text) {
  auto j = ParseJson(text);
  EXPECT_TRUE(j.ok()) << j.status().message();
  if (!j.ok()) return j.status();
  return ModelConfig::FromHfConfig(*j);
}

TEST(HfConfig, Llama32With3Point1RopeScaling) {
  auto c = FromText(R"({"architectures":["LlamaForCausalLM"],"attention_bias":false,"attention_dropout":0.0,
    "bos_token_id":128000,"eos_token_id":128001,"head_dim":64,"hidden_act":"silu","hidden_size":2048,
    "initializer_range":0.02,"intermediate_size":8192,"max_position_embeddings":131072,"mlp_bias":false,
    "model_type":"llama","num_attention_heads":32,"num_hidden_layers":16,"num_key_value_heads":8,"pretraining_tp":1,
    "rms_norm_eps":1e-05,"rope_scaling":{"factor":32.0,"high_freq_factor":4.0,"low_freq_factor":1.0,
    "original_max_position_embeddings":8192,"rope_type":"llama3"},"rope_theta":500000.0,"tie_word_embeddings":true,
    "torch_dtype":"bfloat16","transformers_version":"4.45.0.dev0","use_cache":true,"vocab_size":128256})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, "llama");
  EXPECT_EQ(c->n_embd, 2048);
  EXPECT_EQ(c->n_layer, 16);
  EXPECT_EQ(c->n_head, 32);
  EXPECT_EQ(c->n_head_kv, 8);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->rope_dim, 64);
  EXPECT_EQ(c->n_ff, 8192);
  EXPECT_EQ(c->n_vocab, 128256);
  EXPECT_EQ(c->n_ctx_train, 131072);
  EXPECT_FLOAT_EQ(c->rope_theta, 500000.0f);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->rope_style, RopeStyle::kNeox);  // unpermuted HF rows
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 32.0f);
  EXPECT_EQ(c->rope_scaling.original_ctx, 8192);
  EXPECT_FLOAT_EQ(c->rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(c->rope_scaling.high_freq_factor, 4.0f);
}

TEST(HfConfig, Qwen25HasBiasesAndAnUnusedWindow) {
  auto c = FromText(R"({"architectures":["Qwen2ForCausalLM"],"attention_dropout":0.0,"bos_token_id":151643,
    "eos_token_id":151645,"hidden_act":"silu","hidden_size":896,"initializer_range":0.02,"intermediate_size":4864,
    "max_position_embeddings":32768,"max_window_layers":21,"model_type":"qwen2","num_attention_heads":14,
    "num_hidden_layers":24,"num_key_value_heads":2,"rms_norm_eps":1e-06,"rope_theta":1000000.0,
    "sliding_window":32768,"tie_word_embeddings":true,"torch_dtype":"bfloat16","transformers_version":"4.43.1",
    "use_cache":true,"use_sliding_window":false,"vocab_size":151936})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, "qwen2");
  EXPECT_EQ(c->head_dim, 64);  // 896 / 14
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->sliding_window, 0);  // use_sliding_window false
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kNone);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-6f);
}

// Gemma 2 2B's config.json; the 27B's query_pre_attn_scalar (144 =
// hidden_size / heads, not head_dim) scales q·k as llama.cpp's 27B does.
TEST(HfConfig, Gemma2) {
  const std::string gemma2_2b = R"({"architectures":["Gemma2ForCausalLM"],"attention_bias":false,
    "attention_dropout":0.0,"attn_logit_softcapping":50.0,"bos_token_id":2,"cache_implementation":"hybrid",
    "eos_token_id":[1,107],"final_logit_softcapping":30.0,"head_dim":256,"hidden_act":"gelu_pytorch_tanh",
    "hidden_activation":"gelu_pytorch_tanh","hidden_size":2304,"initializer_range":0.02,"intermediate_size":9216,
    "max_position_embeddings":8192,"model_type":"gemma2","num_attention_heads":8,"num_hidden_layers":26,
    "num_key_value_heads":4,"pad_token_id":0,"query_pre_attn_scalar":256,"rms_norm_eps":1e-06,"rope_theta":10000.0,
    "sliding_window":4096,"torch_dtype":"float32","transformers_version":"4.42.4","use_cache":true,
    "vocab_size":256000})";
  auto c = FromText(gemma2_2b);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, "gemma2");
  EXPECT_EQ(c->head_dim, 256);
  EXPECT_TRUE(c->tied_embeddings);  // Gemma2Config's default
  EXPECT_EQ(c->ffn_act, FfnActivation::kGeluTanh);
  EXPECT_FLOAT_EQ(c->embd_scale, std::sqrt(2304.0f));
  EXPECT_TRUE(c->post_norms);
  EXPECT_EQ(c->sliding_window, 4096);
  EXPECT_EQ(c->swa_pattern, 2);
  EXPECT_TRUE(c->IsLocalLayer(0));
  EXPECT_FALSE(c->IsLocalLayer(1));
  EXPECT_EQ(c->attn_scale, 0.0f);  // 1/sqrt(head_dim)
  EXPECT_FLOAT_EQ(c->attn_logit_softcap, 50.0f);
  EXPECT_FLOAT_EQ(c->final_logit_softcap, 30.0f);
  std::string big = gemma2_2b;
  big.replace(big.find("\"query_pre_attn_scalar\":256"), 27, "\"query_pre_attn_scalar\":144");
  big.replace(big.find("\"final_logit_softcapping\":30.0"), 30, "\"final_logit_softcapping\":null");
  c = FromText(big);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FLOAT_EQ(c->attn_scale, 1.0f / 12.0f);
  EXPECT_EQ(c->final_logit_softcap, 0.0f);  // None: no cap
}

TEST(HfConfig, Qwen3HasQkNormAndAnIntegerTheta) {
  auto c = FromText(R"({"architectures":["Qwen3ForCausalLM"],"attention_bias":false,"attention_dropout":0.0,
    "bos_token_id":151643,"eos_token_id":151645,"head_dim":128,"hidden_act":"silu","hidden_size":1024,
    "initializer_range":0.02,"intermediate_size":3072,"max_position_embeddings":40960,"max_window_layers":28,
    "model_type":"qwen3","num_attention_heads":16,"num_hidden_layers":28,"num_key_value_heads":8,
    "rms_norm_eps":1e-06,"rope_scaling":null,"rope_theta":1000000,"sliding_window":null,
    "tie_word_embeddings":true,"torch_dtype":"bfloat16","transformers_version":"4.51.0","use_cache":true,
    "use_sliding_window":false,"vocab_size":151936})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, "qwen3");
  EXPECT_EQ(c->head_dim, 128);  // not 1024 / 16
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_FLOAT_EQ(c->rope_theta, 1e6f);
}

TEST(HfConfig, MistralIsLlamaWithANullWindow) {
  auto c = FromText(R"({"architectures":["MistralForCausalLM"],"attention_dropout":0.0,"bos_token_id":1,
    "eos_token_id":2,"hidden_act":"silu","hidden_size":4096,"initializer_range":0.02,"intermediate_size":14336,
    "max_position_embeddings":32768,"model_type":"mistral","num_attention_heads":32,"num_hidden_layers":32,
    "num_key_value_heads":8,"rms_norm_eps":1e-05,"rope_theta":1000000.0,"sliding_window":null,
    "tie_word_embeddings":false,"torch_dtype":"bfloat16","transformers_version":"4.42.0.dev0","use_cache":true,
    "vocab_size":32768})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, "llama");
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_FALSE(c->tied_embeddings);
  EXPECT_EQ(c->sliding_window, 0);
}

TEST(HfConfig, QwenYarn) {
  auto c = FromText(R"({"architectures":["Qwen2ForCausalLM"],"hidden_size":64,"intermediate_size":128,
    "num_attention_heads":4,"num_hidden_layers":2,"max_position_embeddings":131072,"vocab_size":300,
    "rope_scaling":{"factor":4.0,"original_max_position_embeddings":32768,"type":"yarn"}})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 4.0f);
  EXPECT_EQ(c->rope_scaling.original_ctx, 32768);
  EXPECT_FLOAT_EQ(c->rope_scaling.beta_fast, 32.0f);
  EXPECT_FLOAT_EQ(c->rope_scaling.beta_slow, 1.0f);
}

TEST(HfConfig, RefusesWhatItCannotRun) {
  const std::string base = R"("hidden_size":64,"intermediate_size":128,"num_attention_heads":4,)"
                           R"("num_hidden_layers":2,"max_position_embeddings":512,"vocab_size":300)";
  struct Case {
    std::string json;
    llm_status code;
    std::string needle;
  };
  const Case cases[] = {
      {R"({"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3_text",)" + base +
           R"(,"attn_logit_softcapping":50.0})", LLM_ERR_UNSUPPORTED, "attn_logit_softcapping"},
      {R"({"architectures":["Gemma3ForCausalLM"],)" + base +
           R"(,"layer_types":["full_attention","sliding_attention"]})", LLM_ERR_UNSUPPORTED, "layer_types"},
      {R"({"model_type":"olmoe",)" + base + "}", LLM_ERR_UNSUPPORTED, "'olmoe'"},
      {R"({"architectures":["Gemma2ForCausalLM"],)" + base + R"(,"hidden_activation":"silu"})", LLM_ERR_UNSUPPORTED,
       "gelu_pytorch_tanh"},
      {R"({"architectures":["Gemma2ForCausalLM"],)" + base + R"(,"final_logit_softcapping":-1})",
       LLM_ERR_MODEL_FORMAT, "final_logit_softcapping"},
      {R"({"architectures":["Phi3ForCausalLM"],)" + base + R"(,"partial_rotary_factor":0.7})", LLM_ERR_MODEL_FORMAT,
       "partial_rotary_factor"},
      {R"({"architectures":["LlamaForCausalLM"],)" + base + R"(,"partial_rotary_factor":0.75})", LLM_ERR_UNSUPPORTED,
       "partial_rotary_factor"},
      {R"({"architectures":["Phi3ForCausalLM"],)" + base +
           R"(,"rope_scaling":{"type":"longrope","long_factor":[1],"short_factor":[1]}})",
       LLM_ERR_UNSUPPORTED, "longrope"},
      {R"({"architectures":["LlamaForCausalLM"],)" + base + R"(,"rope_scaling":{"rope_type":"longrope"}})",
       LLM_ERR_UNSUPPORTED, "longrope"},
      {R"({"architectures":["LlamaForCausalLM"],)" + base + R"(,"hidden_act":"gelu"})", LLM_ERR_UNSUPPORTED, "gelu"},
      {R"({"architectures":["LlamaForCausalLM"],)" + base + R"(,"mlp_bias":true})", LLM_ERR_UNSUPPORTED, "mlp_bias"},
      {R"({"architectures":["Qwen2ForCausalLM"],)" + base + R"(,"use_sliding_window":true})", LLM_ERR_UNSUPPORTED,
       "use_sliding_window"},
      {R"({"architectures":["MistralForCausalLM"],)" + base + R"(,"num_local_experts":8})", LLM_ERR_UNSUPPORTED,
       "Mixture-of-Experts"},
      {R"({"architectures":["LlamaForCausalLM"],)" + base + R"(,"num_key_value_heads":3})", LLM_ERR_MODEL_FORMAT,
       "multiple"},
      {R"({"architectures":["LlamaForCausalLM"],)" + base + R"(,"head_dim":7})", LLM_ERR_MODEL_FORMAT, "odd"},
      {R"({"architectures":["LlamaForCausalLM"],"hidden_size":-1})", LLM_ERR_MODEL_FORMAT, "hidden_size"},
      {R"({"architectures":["LlamaForCausalLM"],)" + base + R"(,"rms_norm_eps":"x"})", LLM_ERR_MODEL_FORMAT,
       "rms_norm_eps"},
      {R"({"architectures":["LlamaForCausalLM"],"hidden_size":64})", LLM_ERR_MODEL_FORMAT, "missing"},
      {"[]", LLM_ERR_MODEL_FORMAT, "not a JSON object"},
  };
  for (const Case& k : cases) {
    auto c = FromText(k.json);
    ASSERT_FALSE(c.ok()) << k.json;
    EXPECT_EQ(c.status().code(), k.code) << c.status().message();
    EXPECT_NE(c.status().message().find(k.needle), std::string::npos) << c.status().message();
  }
}

}  // namespace
}  // namespace llm
