// llm-synth: writes a GGUF model (llama, qwen2 or qwen3 family) of a named
// shape with random weights.
//
//   llm-synth --shape llama-3.1-8b --out /tmp/l8b.gguf [--vocab-from model.gguf]
//             [--type bf16|f16|f32|q4_k_m|lowbit|iqmix] [--seed N] [--std 0.02] [--threads N]
//             [--norm-std S] [--bias-std S] [--no-rope-freqs]
//             [--bpe-vocab] [--think-tokens] [--hf-dir DIR [--shards N]] [--chat-template FILE]
//   llm-synth --shape tiny-gemma3 --out text.gguf --mmproj mmproj.gguf   (also its projector file;
//             also tiny-smolvlm: Idefics3, tiny-llava: LLaVA CLIP + MLP, tiny-qwen2vl: Qwen2.5-VL)
//   llm-synth --list
//
// --hf-dir also writes the Hugging Face directory the GGUF would be
// converted from by llama.cpp's convert_hf_to_gguf.py (hf_writer.h; llama,
// qwen2, qwen3, phi3, gemma2, gemma3 with a BPE vocabulary: Qwen families, or --bpe-vocab).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "model/gguf.h"
#include "hf_writer.h"
#include "synth_mmproj.h"
#include "synth_model.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: llm-synth --shape NAME --out FILE [--vocab-from GGUF] [--type bf16|f16|f32|q4_k_m|lowbit|iqmix]\n"
               "                 [--seed N] [--std S] [--threads N] [--norm-std S] [--bias-std S]\n"
               "                 [--no-rope-freqs] [--bpe-vocab] [--think-tokens] [--hf-dir DIR [--shards N]] [--chat-template FILE]\n"
               "                 [--mmproj FILE]\n"
               "       llm-synth --list\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string shape_name, out, vocab_path, type = "bf16", hf_dir, mmproj;
  int shards = 1;
  llm::synth::SynthOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--list") {
      for (const std::string& n : llm::synth::SynthShapeNames()) {
        const llm::synth::SynthShape* s = llm::synth::FindSynthShape(n);
        std::printf("%-14s %-6s %6.2f B params (vocab %d)\n", n.c_str(), s->arch.c_str(), llm::synth::SynthParams(*s, s->n_vocab) / 1e9,
                    s->n_vocab);
      }
      return 0;
    } else if (a == "--shape" && (v = next())) {
      shape_name = v;
    } else if (a == "--out" && (v = next())) {
      out = v;
    } else if (a == "--vocab-from" && (v = next())) {
      vocab_path = v;
    } else if (a == "--type" && (v = next())) {
      type = v;
    } else if (a == "--seed" && (v = next())) {
      o.seed = std::strtoull(v, nullptr, 10);
    } else if (a == "--std" && (v = next())) {
      o.stddev = std::strtof(v, nullptr);
    } else if (a == "--norm-std" && (v = next())) {
      o.norm_std = std::strtof(v, nullptr);
    } else if (a == "--bias-std" && (v = next())) {
      o.bias_std = std::strtof(v, nullptr);
    } else if (a == "--bpe-vocab") {
      o.bpe_vocab = true;
    } else if (a == "--think-tokens") {
      o.think_tokens = true;
    } else if (a == "--hf-dir" && (v = next())) {
      hf_dir = v;
    } else if (a == "--mmproj" && (v = next())) {
      mmproj = v;
    } else if (a == "--shards" && (v = next())) {
      shards = std::atoi(v);
    } else if (a == "--no-rope-freqs") {
      o.drop_rope_freqs = true;
    } else if (a == "--chat-template" && (v = next())) {
      std::FILE* f = std::fopen(v, "rb");
      if (f == nullptr) {
        std::fprintf(stderr, "llm-synth: cannot open %s\n", v);
        return 1;
      }
      char buf[4096];
      for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) o.chat_template.append(buf, n);
      std::fclose(f);
    } else if (a == "--threads" && (v = next())) {
      o.threads = std::atoi(v);
    } else {
      return Usage();
    }
  }
  if (shape_name.empty() || out.empty()) return Usage();
  const llm::synth::SynthShape* shape = llm::synth::FindSynthShape(shape_name);
  if (shape == nullptr) {
    std::fprintf(stderr, "llm-synth: unknown shape '%s' (--list shows them)\n", shape_name.c_str());
    return 2;
  }
  const llm::synth::SynthVisionShape* vision = nullptr;
  if (!mmproj.empty() && (vision = llm::synth::FindSynthVisionShape(shape_name)) == nullptr) {
    std::fprintf(stderr, "llm-synth: the shape '%s' has no projector (--mmproj: tiny-gemma3, tiny-smolvlm, tiny-llava, tiny-qwen2vl, gemma3-4b-vision)\n", shape_name.c_str());
    return 2;
  }
  if (type == "bf16") {
    o.type = llm::TensorType::BF16;
  } else if (type == "f16") {
    o.type = llm::TensorType::F16;
  } else if (type == "f32") {
    o.type = llm::TensorType::F32;
  } else if (type == "q4_k_m") {
    o.q4_k_m = true;  // llama.cpp's Q4_K_M mix (synth_quant.h)
  } else if (type == "lowbit") {
    o.low_bit = true;  // IQ4_XS / IQ4_NL / Q3_K / Q2_K / Q6_K (synth_quant.h)
  } else if (type == "iqmix") {
    o.iq_mix = true;  // IQ3_XXS / IQ3_S / IQ2_XS / IQ2_S / IQ2_XXS / Q6_K (synth_quant.h)
  } else {
    return Usage();
  }
  std::unique_ptr<llm::GgufFile> vocab;
  if (!vocab_path.empty()) {
    auto f = llm::GgufFile::Open(vocab_path);
    if (!f.ok()) {
      std::fprintf(stderr, "llm-synth: %s: %s\n", vocab_path.c_str(), f.status().message().c_str());
      return 1;
    }
    vocab = std::move(*f);
    o.vocab = vocab.get();
  }
  llm::Status st = llm::synth::WriteSynthModel(*shape, o, out);
  if (!st.ok()) {
    std::fprintf(stderr, "llm-synth: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("wrote %s (%s, %s)\n", out.c_str(), shape_name.c_str(), type.c_str());
  if (vision != nullptr) {
    st = llm::synth::WriteSynthMmproj(*vision, o, mmproj);
    if (!st.ok()) {
      std::fprintf(stderr, "llm-synth: %s: %s\n", mmproj.c_str(), st.message().c_str());
      return 1;
    }
    std::printf("wrote %s (projector of %s, %s)\n", mmproj.c_str(), shape_name.c_str(), type.c_str());
  }
  if (!hf_dir.empty()) {
    auto f = llm::GgufFile::Open(out);
    const std::string rope_scaling = shape->llama3_factor > 0.0f && !o.drop_rope_freqs
                                         ? llm::synth::Llama3RopeScalingJson(shape->llama3_factor, shape->llama3_original_ctx)
                                         : "";
    st = f.ok() ? llm::synth::WriteHfDir(**f, hf_dir, shards, rope_scaling) : f.status();
    if (!st.ok()) {
      std::fprintf(stderr, "llm-synth: %s: %s\n", hf_dir.c_str(), st.message().c_str());
      return 1;
    }
    std::printf("wrote %s (Hugging Face directory, %d shard(s))\n", hf_dir.c_str(), shards);
  }
  return 0;
}
