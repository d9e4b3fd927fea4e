// WriteHfDir: see hf_writer.h.
#include "hf_writer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

namespace llm::synth {
namespace {

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// %.9g round-trips a float32; JSON has no inf/nan and these are finite.
std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

Status WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  return out ? Status::Ok() : IoError("cannot write " + path);
}

struct OutTensor {
  std::string name;       // HF name
  const GgufTensorInfo* src;
  std::vector<int64_t> shape;  // HF order (slowest first)
  std::vector<char> bytes;     // when the data differ from the GGUF's (un-permuted q/k)
};

const char* Dtype(TensorType t) { return t == TensorType::F32 ? "F32" : t == TensorType::F16 ? "F16" : "BF16"; }

// HF row of head h, half t, index i  <-  GGUF row h*D + 2i + t (llama.cpp's
// permute(): reshape(n_head, 2, D/2, cols).swapaxes(1, 2)).
std::vector<char> Unpermute(const GgufTensorInfo& t, int64_t n_head) {
  const int64_t cols = t.dims[0], rows = t.dims[1], D = rows / n_head;
  const size_t row_bytes = t.nbytes / static_cast<size_t>(rows);
  std::vector<char> out(t.nbytes);
  const char* src = static_cast<const char*>(t.data);
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t half = 0; half < 2; ++half)
      for (int64_t i = 0; i < D / 2; ++i)
        std::memcpy(out.data() + (h * D + half * D / 2 + i) * row_bytes, src + (h * D + 2 * i + half) * row_bytes,
                    row_bytes);
  (void)cols;
  return out;
}

// One safetensors file: header padded with spaces so the data start at a
// multiple of 8, F32 tensors first so every tensor is aligned to its dtype.
Status WriteSafetensors(const std::string& path, std::vector<OutTensor*> ts) {
  std::stable_sort(ts.begin(), ts.end(),
                   [](const OutTensor* a, const OutTensor* b) { return a->src->type == TensorType::F32 && b->src->type != TensorType::F32; });
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t off = 0;
  for (const OutTensor* t : ts) {
    // appended piecewise: GCC 12 warns (-Wrestrict, falsely) on "lit" + std::string
    header += ',';
    header += JsonString(t->name);
    header += std::string(":{\"dtype\":\"") + Dtype(t->src->type) + "\",\"shape\":[";
    for (size_t i = 0; i < t->shape.size(); ++i) {
      if (i) header += ',';
      header += std::to_string(t->shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + t->src->nbytes) + "]}";
    off += t->src->nbytes;
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  out += header;
  for (const OutTensor* t : ts) {
    if (!t->bytes.empty()) out.append(t->bytes.data(), t->bytes.size());
    else out.append(static_cast<const char*>(t->src->data), t->src->nbytes);
  }
  return WriteFile(path, out);
}

// A GGUF name to transformers' (empty when it has none here). phi3's
// ffn_up holds gate and up rows: transformers' gate_up_proj.
std::string HfName(const std::string& g, bool phi3, bool gemma2) {
  if (g == "token_embd.weight") return "model.embed_tokens.weight";
  if (g == "output_norm.weight") return "model.norm.weight";
  if (g == "output.weight") return "lm_head.weight";
  if (g.rfind("blk.", 0) != 0) return "";
  const size_t dot = g.find('.', 4);
  const std::string layer = g.substr(4, dot - 4), rest = g.substr(dot + 1);
  static const char* const kMap[][2] = {
      {"attn_norm.weight", "input_layernorm.weight"},      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},         {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},    {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.bias", "self_attn.k_proj.bias"},             {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"},    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"}, {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},              {"ffn_down.weight", "mlp.down_proj.weight"}};
  if (phi3 && rest == "ffn_up.weight") return "model.layers." + layer + ".mlp.gate_up_proj.weight";
  if (gemma2) {
    // Gemma 2's four norms, named after their place around each sub-block
    if (rest == "post_attention_norm.weight") return "model.layers." + layer + ".post_attention_layernorm.weight";
    if (rest == "ffn_norm.weight") return "model.layers." + layer + ".pre_feedforward_layernorm.weight";
    if (rest == "post_ffw_norm.weight") return "model.layers." + layer + ".post_feedforward_layernorm.weight";
  }
  if (rest == "attn_qkv.weight") return "model.layers." + layer + ".self_attn.qkv_proj.weight";
  for (const auto& m : kMap)
    if (rest == m[0]) return "model.layers." + layer + "." + m[1];
  return "";
}

Status WriteTokenizer(const GgufFile& g, const std::string& dir) {
  LLM_ASSIGN_OR_RETURN(std::string_view model, g.GetString("tokenizer.ggml.model"));
  if (model != "gpt2") return Unsupported("WriteHfDir: only a byte-level BPE (gpt2) vocabulary has a tokenizer.json");
  LLM_ASSIGN_OR_RETURN(auto tokens, g.GetStringArray("tokenizer.ggml.tokens"));
  LLM_ASSIGN_OR_RETURN(auto types, g.GetIntArray("tokenizer.ggml.token_type"));
  LLM_ASSIGN_OR_RETURN(auto merges, g.GetStringArray("tokenizer.ggml.merges"));
  std::string vocab, added;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i) vocab += ',';
    vocab += JsonString(tokens[i]);
    vocab += ':';
    vocab += std::to_string(i);
    if (types[i] == 3)
      added += std::string(added.empty() ? "" : ",") + "{\"id\":" + std::to_string(i) + ",\"content\":" +
               JsonString(tokens[i]) + ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
               "\"normalized\":false,\"special\":true}";
  }
  std::string m;
  for (size_t i = 0; i < merges.size(); ++i) {
    if (i) m += ',';
    m += JsonString(merges[i]);
  }
  // Qwen2's pre-tokenizer (the regex llama.cpp calls "qwen2"), then ByteLevel.
  const std::string regex =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  const std::string tok =
      "{\"version\":\"1.0\",\"added_tokens\":[" + added + "],\"normalizer\":null,"
      "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":" +
      JsonString(regex) + "},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\","
      "\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]},"
      "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":{" + vocab + "},\"merges\":[" + m +
      "]}}";
  LLM_RETURN_IF_ERROR(WriteFile(dir + "/tokenizer.json", tok));

  std::string cfg = "{";
  for (const char* k : {"bos", "eos"}) {
    const std::string key = std::string("tokenizer.ggml.") + k + "_token_id";
    if (!g.Has(key)) continue;
    LLM_ASSIGN_OR_RETURN(int64_t id, g.GetInt(key));
    if (id < 0 || static_cast<size_t>(id) >= tokens.size()) return InvalidArgument(key + " out of range");
    cfg += JsonString(std::string(k) + "_token");
    cfg += ':';
    cfg += JsonString(tokens[id]);
    cfg += ',';
  }
  bool add_bos = false;
  if (g.Has("tokenizer.ggml.add_bos_token")) {
    LLM_ASSIGN_OR_RETURN(add_bos, g.GetBool("tokenizer.ggml.add_bos_token"));
  }
  cfg += std::string("\"add_bos_token\":") + (add_bos ? "true" : "false");
  if (g.Has("tokenizer.chat_template")) {
    LLM_ASSIGN_OR_RETURN(std::string_view t, g.GetString("tokenizer.chat_template"));
    cfg += ",\"chat_template\":" + JsonString(t);
  }
  return WriteFile(dir + "/tokenizer_config.json", cfg + "}");
}

}  // namespace

std::string Llama3RopeScalingJson(float factor, int original_ctx) {
  return "{\"rope_type\":\"llama3\",\"factor\":" + Num(factor) +
         ",\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,\"original_max_position_embeddings\":" +
         std::to_string(original_ctx) + "}";
}

Status WriteHfDir(const GgufFile& g, const std::string& dir, int shards, const std::string& rope_scaling_json) {
  LLM_ASSIGN_OR_RETURN(std::string_view arch_sv, g.GetString("general.architecture"));
  const std::string arch(arch_sv);
  const char* hf_arch = arch == "llama" ? "LlamaForCausalLM" : arch == "qwen2" ? "Qwen2ForCausalLM"
                        : arch == "qwen3" ? "Qwen3ForCausalLM" : arch == "phi3" ? "Phi3ForCausalLM"
                        : arch == "gemma2" ? "Gemma2ForCausalLM" : arch == "gemma3" ? "Gemma3ForCausalLM" : nullptr;
  if (hf_arch == nullptr) return Unsupported("WriteHfDir: no Hugging Face layout for '" + arch + "'");
  auto I = [&](const char* k) -> StatusOr<int64_t> { return g.GetInt(arch + "." + k); };
  LLM_ASSIGN_OR_RETURN(int64_t n_head, I("attention.head_count"));
  LLM_ASSIGN_OR_RETURN(int64_t n_head_kv, I("attention.head_count_kv"));
  LLM_ASSIGN_OR_RETURN(int64_t n_embd, I("embedding_length"));
  LLM_ASSIGN_OR_RETURN(int64_t n_layer, I("block_count"));
  LLM_ASSIGN_OR_RETURN(int64_t n_ff, I("feed_forward_length"));
  LLM_ASSIGN_OR_RETURN(int64_t n_ctx, I("context_length"));
  LLM_ASSIGN_OR_RETURN(int64_t head_dim, I("attention.key_length"));
  LLM_ASSIGN_OR_RETURN(double theta, g.GetFloat(arch + ".rope.freq_base"));
  LLM_ASSIGN_OR_RETURN(double eps, g.GetFloat(arch + ".attention.layer_norm_rms_epsilon"));
  std::string partial_rotary;  // Phi's partial_rotary_factor, when not all dims rotate
  if (g.Has(arch + ".rope.dimension_count")) {
    LLM_ASSIGN_OR_RETURN(int64_t rd, I("rope.dimension_count"));
    if (rd != head_dim && arch != "phi3") return Unsupported("WriteHfDir: partial rotary dims");
    if (rd != head_dim) partial_rotary = ",\"partial_rotary_factor\":" + Num(static_cast<double>(rd) / head_dim);
  }
  if (g.FindTensor("rope_factors_long.weight") != nullptr)
    return Unsupported("WriteHfDir: LongRoPE factors (config.json's rope_scaling lists) are not written here");
  if (g.Has(arch + ".expert_count")) return Unsupported("WriteHfDir: experts have no HF form here");
  if (g.FindTensor("rope_freqs.weight") != nullptr && rope_scaling_json.empty())
    return InvalidArgument("WriteHfDir: a GGUF with rope_freqs.weight needs the rope_scaling it was computed from");
  const auto n_vocab = g.ArrayLength("tokenizer.ggml.tokens");
  if (!n_vocab) return InvalidArgument("WriteHfDir: no tokenizer.ggml.tokens");
  const bool tied = g.FindTensor("output.weight") == nullptr;
  const bool gemma3 = arch == "gemma3", gemma2 = arch == "gemma2" || gemma3;  // gemma2: either Gemma's layout
  std::string act = "silu", extra, model_type = arch;
  if (gemma2) {
    // transformers' Gemma2Config / Gemma3TextConfig; the GGUF's soft-caps
    // (null when absent) and window, and query_pre_attn_scalar = head_dim
    // (llama.cpp's scale below the 27B models).
    act = "gelu_pytorch_tanh";
    extra = ",\"hidden_activation\":\"gelu_pytorch_tanh\",\"query_pre_attn_scalar\":" + std::to_string(head_dim);
    for (const char* k : {"attn_logit_softcapping", "final_logit_softcapping"}) {
      std::string v = "null";
      if (g.Has(arch + "." + k)) {
        LLM_ASSIGN_OR_RETURN(double cap, g.GetFloat(arch + "." + k));
        v = Num(cap);
      }
      extra += std::string(",\"") + k + "\":" + v;
    }
    LLM_ASSIGN_OR_RETURN(int64_t window, I("attention.sliding_window"));
    extra += ",\"sliding_window\":" + std::to_string(window);
  }
  if (gemma3) {
    model_type = "gemma3_text";
    double local_base = 10000.0;
    if (g.Has(arch + ".rope.freq_base_swa")) {
      LLM_ASSIGN_OR_RETURN(local_base, g.GetFloat(arch + ".rope.freq_base_swa"));
    }
    int64_t pattern = 6;
    if (g.Has(arch + ".attention.sliding_window_pattern")) {
      LLM_ASSIGN_OR_RETURN(pattern, I("attention.sliding_window_pattern"));
    }
    extra += ",\"rope_local_base_freq\":" + Num(local_base) + ",\"sliding_window_pattern\":" + std::to_string(pattern);
  }

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create " + dir + ": " + ec.message());
  const std::string cfg =
      std::string("{\"architectures\":[\"") + hf_arch + "\"],\"model_type\":\"" + model_type +
      "\",\"hidden_size\":" + std::to_string(n_embd) + ",\"num_hidden_layers\":" + std::to_string(n_layer) +
      ",\"intermediate_size\":" + std::to_string(n_ff) + ",\"num_attention_heads\":" + std::to_string(n_head) +
      ",\"num_key_value_heads\":" + std::to_string(n_head_kv) + ",\"head_dim\":" + std::to_string(head_dim) +
      ",\"max_position_embeddings\":" + std::to_string(n_ctx) + ",\"vocab_size\":" + std::to_string(*n_vocab) +
      ",\"rms_norm_eps\":" + Num(eps) + ",\"rope_theta\":" + Num(theta) + ",\"hidden_act\":\"" + act + "\"" + partial_rotary + extra +
      ",\"tie_word_embeddings\":" + (tied ? "true" : "false") + ",\"rope_scaling\":" + (rope_scaling_json.empty() ? std::string("null") : rope_scaling_json) + ",\"torch_dtype\":\"bfloat16\"}";
  LLM_RETURN_IF_ERROR(WriteFile(dir + "/config.json", cfg));
  LLM_RETURN_IF_ERROR(WriteTokenizer(g, dir));

  std::vector<OutTensor> ts;
  for (const GgufTensorInfo& t : g.tensors()) {
    if (t.name == "rope_freqs.weight") continue;  // config.json's rope_scaling instead
    const std::string name = HfName(t.name, arch == "phi3", gemma2);
    if (name.empty()) return Unsupported("WriteHfDir: tensor " + t.name + " has no Hugging Face name here");
    OutTensor o{name, &t, std::vector<int64_t>(t.dims.rbegin(), t.dims.rend()), {}};
    if (arch == "llama" && t.dims.size() == 2) {
      if (t.name.ends_with("attn_q.weight")) o.bytes = Unpermute(t, n_head);
      if (t.name.ends_with("attn_k.weight")) o.bytes = Unpermute(t, n_head_kv);
    }
    if (gemma2 && t.name.ends_with("norm.weight")) {
      // HF Gemma stores w where llama.cpp's converter writes w + 1
      if (t.type != TensorType::F32) return Unsupported("WriteHfDir: Gemma norms must be F32");
      o.bytes.resize(t.nbytes);
      const char* src = static_cast<const char*>(t.data);
      for (size_t i = 0; i < t.nbytes / 4; ++i) {
        float v;
        std::memcpy(&v, src + 4 * i, 4);
        v -= 1.0f;
        std::memcpy(o.bytes.data() + 4 * i, &v, 4);
      }
    }
    ts.push_back(std::move(o));
  }
  if (shards <= 1) {
    std::vector<OutTensor*> all;
    for (auto& t : ts) all.push_back(&t);
    return WriteSafetensors(dir + "/model.safetensors", all);
  }
  std::string map;
  const size_t per = (ts.size() + shards - 1) / static_cast<size_t>(shards);
  for (int s = 0; s < shards; ++s) {
    char file[64];
    std::snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", s + 1, shards);
    std::vector<OutTensor*> part;
    for (size_t i = s * per; i < std::min(ts.size(), (s + 1) * per); ++i) {
      part.push_back(&ts[i]);
      if (!map.empty()) map += ',';
      map += JsonString(ts[i].name);
      map += ':';
      map += JsonString(file);
    }
    LLM_RETURN_IF_ERROR(WriteSafetensors(dir + "/" + file, part));
  }
  return WriteFile(dir + "/model.safetensors.index.json", "{\"metadata\":{},\"weight_map\":{" + map + "}}");
}

}  // namespace llm::synth
