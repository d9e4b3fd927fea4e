// Images to soft tokens (issue 36), Qwen2.5-VL's path, against llama.cpp:
// the tiny synthesized Qwen2.5-VL projector file (llm-synth --shape
// tiny-qwen2vl --mmproj, F32: a 4-layer tower of width 32 on 14 x 14
// patches, 2D RoPE, window attention in layers 0 and 2, SwiGLU, the 2 x 2
// patch merger to tiny-qwen2vl's width 64) encodes pictures of several
// sizes and aspect ratios at their own sizes, compared with what llama.cpp's
// multimodal library gave for the same files and pictures
// (tests/data/vision/qwen25vl.*, written by tools/vision_reference_qwen25vl.py):
//   * the size chosen and the fitted picture equal llama.cpp's sizing and
//     Pillow's BICUBIC resize + paste byte for byte;
//   * the soft-token count is llama.cpp's;
//   * every value within 1e-3 relative (|a - b| <= 1e-3 max(|b|, 1)) and the
//     whole image's error within 1e-4 of its norm;
//   * one-detail mutants (every layer attending fully; the RoPE axes
//     swapped) miss llama.cpp by far more than the tolerance.
// Then the refusals.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "backend/cpu/qwen25vl_vision.h"
#include "backend/cpu/vision_encoder.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/vision_config.h"
#include "model/vision_weights.h"
#include "support/damaged_projector.h"
#include "support/rel_diff.h"
#include "support/test_paths.h"
#include "support/vision_reference.h"
#include "synth_model.h"
#include "util/json.h"
#include "vision/image_preprocess_dynamic.h"
#include "vision/image_resize.h"
#include "vision/image_tokens.h"

namespace llm::test {
namespace {

constexpr double kRelTol = 1e-3;
constexpr double kNormTol = 1e-4;

struct Case {
  RgbImage image, fitted;
  int32_t n_tokens = 0;
  std::vector<float> ref;  // (n_tokens, n_embd)
};

class Qwen25VLVision : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    VisionReference r;
    ASSERT_NO_FATAL_FAILURE(LoadVisionReference("qwen25vl", &r));
    ref_ = new Json(std::move(r.json));
    n_embd_ = static_cast<int32_t>(ref_->Find("n_embd")->as_int());
    cases_ = new std::vector<Case>();
    for (const Json& c : ref_->Find("cases")->array()) {
      Case k;
      r.TakePicture(c, &k.image);
      k.n_tokens = static_cast<int32_t>(c.Find("n_tokens")->as_int());
      r.TakeRgb(c.Find("resized_offset")->as_int(), static_cast<int32_t>(c.Find("resized_width")->as_int()),
                static_cast<int32_t>(c.Find("resized_height")->as_int()), &k.fitted);
      r.TakeFloats(c.Find("embd_offset")->as_int(), static_cast<size_t>(k.n_tokens) * n_embd_, &k.ref);
      cases_->push_back(std::move(k));
    }
    // the projector file llama.cpp ran, rebuilt and checked byte for byte
    path_ = new std::string(TempModelPath("qwen25vl", ".gguf"));
    ASSERT_NO_FATAL_FAILURE(SynthesizeReferenceProjector(*ref_, *path_, "tools/vision_reference_qwen25vl.py"));
  }
  static void TearDownTestSuite() {
    if (path_ != nullptr) std::remove(path_->c_str());
    delete path_;
    delete cases_;
    delete ref_;
    path_ = nullptr;
    cases_ = nullptr;
    ref_ = nullptr;
  }

  static DynamicSizeRule Rule(const VisionConfig& c) { return {c.size_align(), c.min_pixels(), c.max_pixels()}; }

  // Every case through an encoder: the worst difference from llama.cpp's.
  static RelDiff Run(cpu::VisionEncoder& enc, const VisionConfig& c, bool expect_close) {
    RelDiff all;
    for (const Case& k : *cases_) {
      SCOPED_TRACE(std::to_string(k.image.width) + "x" + std::to_string(k.image.height));
      std::vector<float> pixels;
      ImageSize size;
      Status st = PreprocessDynamicSize(k.image, Rule(c), ImageNorm{c.image_mean, c.image_std}, &pixels, &size);
      EXPECT_TRUE(st.ok()) << st.message();
      if (!st.ok()) continue;
      EXPECT_EQ(enc.n_tokens_for(size.width, size.height), k.n_tokens);
      std::vector<float> out(k.ref.size());
      st = enc.EncodeSized(pixels, size.width, size.height, out.data());
      EXPECT_TRUE(st.ok()) << st.message();
      const RelDiff d = CompareRel(out.data(), k.ref.data(), out.size(), kRelTol);
      if (expect_close) {
        EXPECT_EQ(d.bad, 0u) << "worst relative difference " << d.worst;
        EXPECT_LE(d.norm, kNormTol) << "worst relative difference " << d.worst;
      }
      all.worst = std::max(all.worst, d.worst);
      all.norm = std::max(all.norm, d.norm);
      all.bad += d.bad;
    }
    return all;
  }

  static Json* ref_;
  static std::vector<Case>* cases_;
  static std::string* path_;
  static int32_t n_embd_;
};

Json* Qwen25VLVision::ref_ = nullptr;
std::vector<Case>* Qwen25VLVision::cases_ = nullptr;
std::string* Qwen25VLVision::path_ = nullptr;
int32_t Qwen25VLVision::n_embd_ = 0;

TEST_F(Qwen25VLVision, ConfigFromFile) {
  auto m = VisionModel::Open(*path_);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const VisionConfig& c = (*m)->config;
  EXPECT_EQ(c.projector, ProjectorType::kQwen25VL);
  EXPECT_TRUE(c.dynamic_size());
  EXPECT_EQ(c.n_embd, 32);
  EXPECT_EQ(c.n_ff, 48);
  EXPECT_EQ(c.n_layer, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.patch_size, 14);
  EXPECT_EQ(c.n_merge, 2);
  EXPECT_EQ(c.n_wa_pattern, 2);
  EXPECT_EQ(c.n_embd_out, n_embd_);
  EXPECT_EQ(c.size_align(), 28);
  EXPECT_EQ(c.min_pixels(), 8 * 28 * 28);
  EXPECT_EQ(c.max_pixels(), 4096 * 28 * 28);
  EXPECT_EQ(ImageTokensFor(c.projector).begin, "<|vision_start|>");
  EXPECT_EQ(ImageTokensFor(c.projector).arch, "qwen2vl");
}

// The size llama.cpp chose, and the fitted picture against Pillow's
// (resize BICUBIC + paste), byte for byte.
TEST_F(Qwen25VLVision, DynamicSizeAndFitEqualPillow) {
  auto m = VisionModel::Open(*path_);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_GE(cases_->size(), 6u);
  size_t resized = 0, padded = 0;
  for (const Case& k : *cases_) {
    SCOPED_TRACE(std::to_string(k.image.width) + "x" + std::to_string(k.image.height));
    auto size = DynamicTargetSize(k.image.width, k.image.height, Rule((*m)->config));
    ASSERT_TRUE(size.ok()) << size.status().message();
    EXPECT_EQ(size->width, k.fitted.width);
    EXPECT_EQ(size->height, k.fitted.height);
    auto fit = FitToDynamicSize(k.image, Rule((*m)->config));
    ASSERT_TRUE(fit.ok()) << fit.status().message();
    ASSERT_EQ(fit->rgb.size(), k.fitted.rgb.size());
    size_t diff = 0;
    for (size_t i = 0; i < k.fitted.rgb.size(); ++i) diff += fit->rgb[i] != k.fitted.rgb[i];
    EXPECT_EQ(diff, 0u) << "bytes unlike Pillow's";
    resized += k.fitted.width != k.image.width || k.fitted.height != k.image.height;
    padded += k.fitted.rgb[0] == 0 && k.fitted.rgb[1] == 0 && k.fitted.rgb[2] == 0;
  }
  EXPECT_GE(resized, 5u);  // the cases exercise the resize, not only the copy
  EXPECT_GE(padded, 1u);
}

TEST_F(Qwen25VLVision, EmbeddingsMatchLlamaCpp) {
  auto m = VisionModel::Open(*path_);
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto enc = cpu::CreateCpuVisionEncoder((*m)->config, (*m)->weights, 2);
  ASSERT_TRUE(enc.ok()) << enc.status().message();
  EXPECT_EQ((*enc)->n_embd_out(), n_embd_);
  const RelDiff d = Run(**enc, (*m)->config, /*expect_close=*/true);
  std::printf("Qwen2.5-VL vs llama.cpp: worst relative %.3g, worst norm %.3g\n", d.worst, d.norm);
}

// One detail changed at a time, each far outside the tolerance: the test
// sees window attention and the RoPE's axes.
TEST_F(Qwen25VLVision, OneDetailMutantsMissLlamaCpp) {
  auto m = VisionModel::Open(*path_);
  ASSERT_TRUE(m.ok()) << m.status().message();
  for (int which = 0; which < 2; ++which) {
    cpu::Qwen25VLMutation mut;
    (which == 0 ? mut.full_attention : mut.swap_rope_axes) = true;
    auto enc = cpu::CreateQwen25VLVision((*m)->config, (*m)->weights, 2, mut);
    ASSERT_TRUE(enc.ok()) << enc.status().message();
    const RelDiff d = Run(**enc, (*m)->config, /*expect_close=*/false);
    std::printf("mutant %s: worst relative %.3g, worst norm %.3g\n", which == 0 ? "full attention" : "RoPE axes swapped",
                d.worst, d.norm);
    EXPECT_GT(d.worst, 10 * kRelTol) << (which == 0 ? "full attention" : "RoPE axes swapped");
    EXPECT_GT(d.norm, 10 * kNormTol) << (which == 0 ? "full attention" : "RoPE axes swapped");
  }
}

// Same pixels, same tokens, whatever the thread count.
TEST_F(Qwen25VLVision, ThreadCountDoesNotChangeTokens) {
  auto m = VisionModel::Open(*path_);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const VisionConfig& c = (*m)->config;
  auto one = cpu::CreateCpuVisionEncoder(c, (*m)->weights, 1);
  auto three = cpu::CreateCpuVisionEncoder(c, (*m)->weights, 3);
  ASSERT_TRUE(one.ok() && three.ok());
  std::vector<float> pixels;
  ImageSize size;
  ASSERT_TRUE(PreprocessDynamicSize(cases_->at(1).image, Rule(c), ImageNorm{c.image_mean, c.image_std}, &pixels, &size).ok());
  const size_t n = static_cast<size_t>((*one)->n_tokens_for(size.width, size.height)) * c.n_embd_out;
  ASSERT_GT(n, 0u);
  std::vector<float> a(n), b(n);
  ASSERT_TRUE((*one)->EncodeSized(pixels, size.width, size.height, a.data()).ok());
  ASSERT_TRUE((*three)->EncodeSized(pixels, size.width, size.height, b.data()).ok());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), n * sizeof(float)), 0);
}

TEST_F(Qwen25VLVision, BadInputsRefused) {
  auto m = VisionModel::Open(*path_);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const VisionConfig& c = (*m)->config;
  auto enc = cpu::CreateCpuVisionEncoder(c, (*m)->weights, 1);
  ASSERT_TRUE(enc.ok());
  std::vector<float> out(64 * 64 * 4), pixels(3 * 56 * 56, 0.0f);
  EXPECT_TRUE((*enc)->EncodeSized(pixels, 56, 56, out.data()).ok());
  EXPECT_EQ((*enc)->Encode(pixels, out.data()).code(), LLM_ERR_INVALID_ARGUMENT);  // needs the size
  EXPECT_EQ((*enc)->EncodeSized(pixels, 56, 56, nullptr).code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ((*enc)->EncodeSized(pixels, 56, 57, out.data()).code(), LLM_ERR_INVALID_ARGUMENT);   // not a multiple of 28
  EXPECT_EQ((*enc)->EncodeSized(pixels, 28, 56, out.data()).code(), LLM_ERR_INVALID_ARGUMENT);  // wrong pixel count
  EXPECT_EQ((*enc)->EncodeSized(pixels, 0, 0, out.data()).code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ((*enc)->EncodeSized(pixels, -56, -56, out.data()).code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ((*enc)->EncodeSized(pixels, 28 * 200, 28 * 200, out.data()).code(), LLM_ERR_INVALID_ARGUMENT);  // > 4096 cells
  EXPECT_EQ((*enc)->n_tokens_for(57, 56), 0);
  EXPECT_EQ(cpu::CreateCpuVisionEncoder(c, (*m)->weights, 0).status().code(), LLM_ERR_INVALID_ARGUMENT);

  const DynamicSizeRule rule = Rule(c);
  const ImageNorm norm{c.image_mean, c.image_std};
  ImageSize size;
  RgbImage empty;
  EXPECT_EQ(PreprocessDynamicSize(empty, rule, norm, &pixels, &size).code(), LLM_ERR_INVALID_ARGUMENT);
  RgbImage huge;  // declared 100000 x 100000, no pixels: refused before any allocation
  huge.width = huge.height = 100000;
  EXPECT_EQ(PreprocessDynamicSize(huge, rule, norm, &pixels, &size).code(), LLM_ERR_INVALID_ARGUMENT);
  RgbImage lying = cases_->at(1).image;  // a buffer shorter than its declared size
  lying.rgb.resize(lying.rgb.size() - 1);
  EXPECT_EQ(PreprocessDynamicSize(lying, rule, norm, &pixels, &size).code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(PreprocessDynamicSize(cases_->at(0).image, rule, norm, nullptr, &size).code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(DynamicTargetSize(10, 10, DynamicSizeRule{0, 0, 0}).status().code(), LLM_ERR_INVALID_ARGUMENT);
  // the ceiling: a 16000 x 16000 picture shrinks to at most max_pixels
  auto big = DynamicTargetSize(16000, 16000, rule);
  ASSERT_TRUE(big.ok()) << big.status().message();
  EXPECT_LE(int64_t{big->width} * big->height, c.max_pixels());
  EXPECT_EQ(big->width % 28, 0);
  EXPECT_EQ(ResizeBicubic(cases_->at(0).image, 0, 5).status().code(), LLM_ERR_INVALID_ARGUMENT);
}

// The text model: qwen2vl is read as Qwen2's block with its M-RoPE
// sections (rope.dimension_sections), which are required and checked:
// hostile values (negative, summing to 0 or past the head, too many) are a
// clear MODEL_FORMAT error, never a model with wrong rotations.
TEST_F(Qwen25VLVision, TextModelMropeSections) {
  const synth::SynthShape* shape = synth::FindSynthShape("tiny-qwen2vl");
  ASSERT_NE(shape, nullptr);
  synth::SynthOptions o;
  o.type = TensorType::F32;
  const std::string text = ::testing::TempDir() + "/llmrt_qwen2vl_text_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(synth::WriteSynthModel(*shape, o, text).ok());
  const std::string good = ReadFile(text);
  std::remove(text.c_str());
  auto config = [](const std::string& bytes) -> StatusOr<ModelConfig> {
    auto f = GgufFile::FromMemory(bytes.data(), bytes.size());
    if (!f.ok()) return f.status();
    return ModelConfig::FromGguf(**f);
  };
  auto c = config(good);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, "qwen2vl");
  EXPECT_TRUE(c->mrope());
  EXPECT_EQ(c->mrope_sections, (std::array<int32_t, 4>{2, 3, 3, 0}));  // of head_dim 16's 8 pairs
  EXPECT_EQ(c->rope_style, RopeStyle::kNeox);
  EXPECT_TRUE(c->qkv_bias);

  // the key's value: type (array), element type (int32), count (u64), values
  const std::string key = "qwen2vl.rope.dimension_sections";
  const size_t at = good.find(key);
  ASSERT_NE(at, std::string::npos);
  const size_t values = at + key.size() + 4 + 4 + 8;
  auto with = [&](std::array<int32_t, 4> v) {
    std::string s = good;
    std::memcpy(&s[values], v.data(), sizeof v);
    return s;
  };
  for (const auto& [v, what] : std::vector<std::pair<std::array<int32_t, 4>, std::string>>{
           {{-1, 3, 3, 0}, "outside"}, {{0, 0, 0, 0}, "sums to 0"}, {{2, 3, 3, 9}, "sums to 17"},
           {{2, 3, 3, 1 << 30}, "outside"}}) {
    auto bad = config(with(v));
    EXPECT_EQ(bad.status().code(), LLM_ERR_MODEL_FORMAT) << what;
    EXPECT_NE(bad.status().message().find(what), std::string::npos) << bad.status().message();
  }
  std::string five = good;  // a count of 5: the reader refuses it before reading past the array
  uint64_t n5 = 5;
  std::memcpy(&five[values - 8], &n5, 8);
  EXPECT_FALSE(config(five).ok());
  std::string missing = good;  // the key renamed: required
  missing[at + key.size() - 1] = 'z';
  auto m = config(missing);
  EXPECT_EQ(m.status().code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_NE(m.status().message().find("rope.dimension_sections"), std::string::npos) << m.status().message();
}

// The projector file damaged one way at a time: a clear status, never a crash.
TEST_F(Qwen25VLVision, DamagedFilesRefused) {
  const std::string good = ReadFile(*path_);
  ASSERT_FALSE(good.empty());
  auto patched = [&](const std::string& from, const std::string& to) { return Patched(good, from, to); };
  const auto open = OpenProjectorBytes;
  EXPECT_TRUE(open(good).ok());
  EXPECT_EQ(open(patched("qwen2.5vl_merger", "qwen2.5vl_mergeX")).code(), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(open(patched("clip.use_silu", "clip.use_gelu")).code(), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(open(patched("clip.vision.n_wa_pattern", "clip.vision.n_wa_patterX")).code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(open(patched("v.patch_embd.weight.1", "v.patch_embd.weight.X")).code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(open(patched("v.blk.3.ffn_gate.weight", "v.blk.3.ffn_gatX.weight")).code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(open(patched("mm.2.weight", "mm.3.weight")).code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(open(patched("v.blk.1.ln2.weight", "v.blk.0.ls1.weight")).code(), LLM_ERR_UNSUPPORTED);  // a layer scale: not this tower
  EXPECT_NE(open(good.substr(0, good.size() / 2)).code(), LLM_OK);  // truncated
}

}  // namespace
}  // namespace llm::test
