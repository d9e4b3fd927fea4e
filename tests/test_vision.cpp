// Images to soft tokens (issue 36), Gemma 3's path, against llama.cpp: the
// tiny synthesized Gemma 3 projector file (llm-synth --mmproj, F32: a SigLIP
// tower of 2 layers on 32 x 32 pixels in 4 x 4 patches, 2 x 2 average
// pooling, RMSNorm, projection to tiny-gemma3's width 64) encodes pictures
// of several sizes and aspect ratios, compared with what llama.cpp's
// multimodal library gave for the same files and pictures
// (tests/data/vision/, written by tools/vision_reference.py):
//   * the picture fitted to the tower's square equals Pillow's resize +
//     paste byte for byte (an oracle independent of llama.cpp);
//   * the soft-token count is llama.cpp's;
//   * every value within 1e-3 relative (|a - b| <= 1e-3 max(|b|, 1)) and the
//     whole image's error within 1e-4 of its norm.
// Then the refusals: files that are not projector files or are damaged,
// pictures of impossible sizes, wrong pixel counts.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/vision_encoder.h"
#include "model/vision_config.h"
#include "model/vision_weights.h"
#include "support/damaged_projector.h"
#include "support/rel_diff.h"
#include "support/test_paths.h"
#include "support/vision_reference.h"
#include "util/json.h"
#include "vision/image_preprocess.h"
#include "vision/image_resize.h"

namespace llm::test {
namespace {

constexpr double kRelTol = 1e-3;
constexpr double kNormTol = 1e-4;

struct Case {
  RgbImage image, boxed;
  int32_t n_tokens = 0;
  std::vector<float> ref;  // (n_tokens, n_embd)
};

class Gemma3Vision : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    VisionReference r;
    ASSERT_NO_FATAL_FAILURE(LoadVisionReference("gemma3", &r));
    ref_ = new Json(std::move(r.json));
    n_embd_ = static_cast<int32_t>(ref_->Find("n_embd")->as_int());
    const int32_t side = static_cast<int32_t>(ref_->Find("image_size")->as_int());
    cases_ = new std::vector<Case>();
    for (const Json& c : ref_->Find("cases")->array()) {
      Case k;
      r.TakePicture(c, &k.image);
      k.n_tokens = static_cast<int32_t>(c.Find("n_tokens")->as_int());
      r.TakeRgb(c.Find("boxed_offset")->as_int(), side, side, &k.boxed);
      r.TakeFloats(c.Find("embd_offset")->as_int(), static_cast<size_t>(k.n_tokens) * n_embd_, &k.ref);
      cases_->push_back(std::move(k));
    }
    // the projector file llama.cpp ran, rebuilt and checked byte for byte
    path_ = new std::string(TempModelPath("vision", ".gguf"));
    ASSERT_NO_FATAL_FAILURE(SynthesizeReferenceProjector(*ref_, *path_, "tools/vision_reference.py"));
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

  static Json* ref_;
  static std::vector<Case>* cases_;
  static std::string* path_;
  static int32_t n_embd_;
};

Json* Gemma3Vision::ref_ = nullptr;
std::vector<Case>* Gemma3Vision::cases_ = nullptr;
std::string* Gemma3Vision::path_ = nullptr;
int32_t Gemma3Vision::n_embd_ = 0;

TEST_F(Gemma3Vision, ConfigFromFile) {
  auto m = VisionModel::Open(*path_);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const VisionConfig& c = (*m)->config;
  EXPECT_EQ(c.projector, ProjectorType::kGemma3);
  EXPECT_EQ(c.n_embd, 32);
  EXPECT_EQ(c.n_ff, 48);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.image_size, 32);
  EXPECT_EQ(c.patch_size, 4);
  EXPECT_EQ(c.n_merge, 2);
  EXPECT_EQ(c.n_embd_out, n_embd_);
  EXPECT_EQ(c.n_image_tokens(), 16);
  EXPECT_FLOAT_EQ(c.image_mean[1], 0.46f);
  EXPECT_FLOAT_EQ(c.image_std[2], 0.28f);
}

// The fitted square against Pillow's (resize BILINEAR + paste), byte for byte.
TEST_F(Gemma3Vision, FitToSquareEqualsPillow) {
  ASSERT_GE(cases_->size(), 5u);
  for (const Case& k : *cases_) {
    auto sq = FitToSquare(k.image, k.boxed.width);
    ASSERT_TRUE(sq.ok()) << sq.status().message();
    size_t diff = 0;
    for (size_t i = 0; i < k.boxed.rgb.size(); ++i) diff += sq->rgb[i] != k.boxed.rgb[i];
    EXPECT_EQ(diff, 0u) << k.image.width << "x" << k.image.height << ": bytes unlike Pillow's";
  }
}

TEST_F(Gemma3Vision, EmbeddingsMatchLlamaCpp) {
  auto m = VisionModel::Open(*path_);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const VisionConfig& c = (*m)->config;
  auto enc = cpu::CreateCpuVisionEncoder(c, (*m)->weights, 2);
  ASSERT_TRUE(enc.ok()) << enc.status().message();
  ImageNorm norm{c.image_mean, c.image_std};
  for (const Case& k : *cases_) {
    SCOPED_TRACE(std::to_string(k.image.width) + "x" + std::to_string(k.image.height));
    ASSERT_EQ((*enc)->n_tokens(), k.n_tokens);
    ASSERT_EQ((*enc)->n_embd_out(), n_embd_);
    std::vector<float> pixels;
    Status st = PreprocessFixedSize(k.image, c.image_size, norm, &pixels);
    ASSERT_TRUE(st.ok()) << st.message();
    std::vector<float> out(k.ref.size());
    st = (*enc)->Encode(pixels, out.data());
    ASSERT_TRUE(st.ok()) << st.message();
    const RelDiff d = CompareRel(out.data(), k.ref.data(), out.size(), kRelTol);
    EXPECT_EQ(d.bad, 0u) << "worst relative difference " << d.worst;
    EXPECT_LE(d.norm, kNormTol) << "worst relative difference " << d.worst;
  }
}

// Same pixels, same tokens, whatever the thread count.
TEST_F(Gemma3Vision, ThreadCountDoesNotChangeTokens) {
  auto m = VisionModel::Open(*path_);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const VisionConfig& c = (*m)->config;
  auto one = cpu::CreateCpuVisionEncoder(c, (*m)->weights, 1);
  auto three = cpu::CreateCpuVisionEncoder(c, (*m)->weights, 3);
  ASSERT_TRUE(one.ok() && three.ok());
  std::vector<float> pixels;
  ASSERT_TRUE(PreprocessFixedSize(cases_->at(1).image, c.image_size, ImageNorm{c.image_mean, c.image_std}, &pixels).ok());
  const size_t n = static_cast<size_t>(c.n_image_tokens()) * c.n_embd_out;
  std::vector<float> a(n), b(n);
  ASSERT_TRUE((*one)->Encode(pixels, a.data()).ok());
  ASSERT_TRUE((*three)->Encode(pixels, b.data()).ok());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), n * sizeof(float)), 0);
}

TEST_F(Gemma3Vision, BadInputsRefused) {
  auto m = VisionModel::Open(*path_);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const VisionConfig& c = (*m)->config;
  auto enc = cpu::CreateCpuVisionEncoder(c, (*m)->weights, 1);
  ASSERT_TRUE(enc.ok());
  std::vector<float> out(static_cast<size_t>(c.n_image_tokens()) * c.n_embd_out);
  std::vector<float> short_pixels(10);
  EXPECT_EQ((*enc)->Encode(short_pixels, out.data()).code(), LLM_ERR_INVALID_ARGUMENT);
  std::vector<float> pixels(3ull * c.image_size * c.image_size);
  EXPECT_EQ((*enc)->Encode(pixels, nullptr).code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(cpu::CreateCpuVisionEncoder(c, (*m)->weights, 0).status().code(), LLM_ERR_INVALID_ARGUMENT);

  ImageNorm norm{c.image_mean, c.image_std};
  RgbImage empty;
  EXPECT_EQ(PreprocessFixedSize(empty, 32, norm, &pixels).code(), LLM_ERR_INVALID_ARGUMENT);
  RgbImage huge;  // declared 100000 x 100000, no pixels: refused before any allocation
  huge.width = huge.height = 100000;
  EXPECT_EQ(PreprocessFixedSize(huge, 32, norm, &pixels).code(), LLM_ERR_INVALID_ARGUMENT);
  RgbImage lying = cases_->at(0).image;  // a buffer shorter than its declared size
  lying.rgb.resize(lying.rgb.size() - 1);
  EXPECT_EQ(PreprocessFixedSize(lying, 32, norm, &pixels).code(), LLM_ERR_INVALID_ARGUMENT);
  ImageNorm zero_std = norm;
  zero_std.std[1] = 0.0f;
  EXPECT_EQ(PreprocessFixedSize(cases_->at(0).image, 32, zero_std, &pixels).code(), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ResizeBilinear(cases_->at(0).image, 0, 5).status().code(), LLM_ERR_INVALID_ARGUMENT);
}

// The projector file damaged one way at a time: a clear status, never a crash.
TEST_F(Gemma3Vision, DamagedFilesRefused) {
  const std::string good = ReadFile(*path_);
  ASSERT_FALSE(good.empty());
  auto patched = [&](const std::string& from, const std::string& to) { return Patched(good, from, to); };
  const auto open = OpenProjectorBytes;
  EXPECT_TRUE(open(good).ok());
  // same-length renames keep the file a valid GGUF
  const std::string len6("\x06\0\0\0\0\0\0\0", 8);  // the value's length before "gemma3" (general.name has it too)
  EXPECT_EQ(open(patched(len6 + "gemma3", len6 + "gemmaX")).code(), LLM_ERR_UNSUPPORTED);  // unknown projector
  EXPECT_EQ(open(patched("general.architecture", "general.architectur_")).code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(open(patched("clip.vision.image_mean", "clip.vision.image_meaX")).code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(open(patched("mm.input_projection.weight", "mm.input_projectioX.weight")).code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(open(patched("v.blk.1.attn_k.weight", "v.blk.1.attn_K.weight")).code(), LLM_ERR_MODEL_FORMAT);
  EXPECT_EQ(open(patched("clip.use_gelu", "clip.use_gelX")).code(), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(open(patched("v.blk.1.ln2.weight", "v.blk.0.ls1.weight")).code(), LLM_ERR_UNSUPPORTED);  // a layer scale: not Gemma 3
  EXPECT_NE(open(good.substr(0, good.size() / 2)).code(), LLM_OK);  // truncated
}

}  // namespace
}  // namespace llm::test
