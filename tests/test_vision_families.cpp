// Images to soft tokens (issue 36) for the projector families beside Gemma 3
// (tests/test_vision.cpp), against llama.cpp's multimodal library: the tiny
// synthesized projector files of llm-synth --mmproj, F32,
//   idefics3 (tiny-smolvlm): a SigLIP tower on 32 x 32 tiles, pixel shuffle 2
//     and one linear map, pictures scaled to a longest edge of 64 and cut
//     into up to 2 x 2 tiles plus an overview, Lanczos throughout;
//   mlp (tiny-llava): a CLIP tower (class token first, pre-norm, quick GELU,
//     no patch bias or post-norm) run to its second-to-last layer, then a
//     GELU MLP per patch; pictures fitted bicubic on a grey square;
// pictures of several sizes and aspect ratios (tests/data/vision/<family>.*,
// written by tools/vision_reference.py):
//   * every tower input (tile, overview, fitted square) equals Pillow's
//     resize of the same picture, byte for byte (after normalisation);
//   * the number of tower passes and soft tokens per pass are llama.cpp's;
//   * every value within 1e-3 relative (|a - b| <= 1e-3 max(|b|, 1)) and
//     each pass's error within 1e-4 of its norm.
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
#include "vision/image_prep.h"

namespace llm::test {
namespace {

constexpr double kRelTol = 1e-3;
constexpr double kNormTol = 1e-4;

struct Pass {
  RgbImage input;          // the tower's input as Pillow made it
  int32_t n_tokens = 0;
  std::vector<float> ref;  // (n_tokens, n_embd)
};

struct Case {
  RgbImage image;
  int32_t grid_x = 0, grid_y = 0;
  std::vector<Pass> passes;  // llama.cpp's image chunks, in order
};

struct Family {
  std::string name;
  std::string path;  // the projector file, rebuilt
  int32_t n_embd = 0;
  std::vector<Case> cases;
};

// Loads tests/data/vision/<name>.{json,bin} and rebuilds the projector file.
void LoadFamily(const std::string& name, Family* f) {
  f->name = name;
  VisionReference r;
  ASSERT_NO_FATAL_FAILURE(LoadVisionReference(name, &r));
  const Json& ref = r.json;
  f->n_embd = static_cast<int32_t>(ref.Find("n_embd")->as_int());
  const int32_t side = static_cast<int32_t>(ref.Find("image_size")->as_int());
  for (const Json& c : ref.Find("cases")->array()) {
    Case k;
    r.TakePicture(c, &k.image);
    k.grid_x = static_cast<int32_t>(c.Find("grid_x")->as_int());
    k.grid_y = static_cast<int32_t>(c.Find("grid_y")->as_int());
    for (const Json& ch : c.Find("chunks")->array()) {
      if (ch.Find("tokens") != nullptr) continue;  // the layout's text (test_image_prompt_families)
      Pass p;
      r.TakeRgb(ch.Find("input_offset")->as_int(), side, side, &p.input);
      p.n_tokens = static_cast<int32_t>(ch.Find("n_tokens")->as_int());
      r.TakeFloats(ch.Find("embd_offset")->as_int(), static_cast<size_t>(p.n_tokens) * f->n_embd, &p.ref);
      k.passes.push_back(std::move(p));
    }
    f->cases.push_back(std::move(k));
  }
  f->path = TempModelPath("vision_" + name, ".gguf");
  ASSERT_NO_FATAL_FAILURE(SynthesizeReferenceProjector(ref, f->path, "tools/vision_reference.py"));
}

class VisionFamily : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(LoadFamily(GetParam(), &f_)); }
  void TearDown() override {
    if (!f_.path.empty()) std::remove(f_.path.c_str());
  }
  Family f_;
};

TEST_P(VisionFamily, ConfigFromFile) {
  auto m = VisionModel::Open(f_.path);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const VisionConfig& c = (*m)->config;
  EXPECT_EQ(c.n_embd_out, f_.n_embd);
  EXPECT_EQ(c.image_size, 32);
  if (f_.name == "idefics3") {
    EXPECT_EQ(c.projector, ProjectorType::kIdefics3);
    EXPECT_EQ(c.act, VisionAct::kGelu);
    EXPECT_EQ(c.n_merge, 2);
    EXPECT_EQ(c.longest_edge, 64);
    EXPECT_EQ(c.n_layer_run, c.n_layer);
    EXPECT_EQ(c.n_image_tokens(), 16);
  } else {
    EXPECT_EQ(c.projector, ProjectorType::kMlp);
    EXPECT_EQ(c.act, VisionAct::kGeluQuick);
    EXPECT_EQ(c.n_layer, 3);
    EXPECT_EQ(c.n_layer_run, 2);  // the second-to-last layer's output
    EXPECT_EQ(c.n_image_tokens(), 64);
    EXPECT_FALSE((*m)->weights.class_embd.empty());
    EXPECT_FALSE((*m)->weights.pre_ln.empty());
    EXPECT_TRUE((*m)->weights.post_ln.empty());
    EXPECT_TRUE((*m)->weights.patch_bias.empty());
  }
}

// The tower inputs against Pillow's resizes (an oracle independent of
// llama.cpp), and their count and grid against llama.cpp's image chunks.
TEST_P(VisionFamily, TowerInputsEqualPillow) {
  auto m = VisionModel::Open(f_.path);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const VisionConfig& c = (*m)->config;
  ASSERT_GE(f_.cases.size(), 5u);
  for (const Case& k : f_.cases) {
    SCOPED_TRACE(std::to_string(k.image.width) + "x" + std::to_string(k.image.height));
    auto in = PrepareForTower(k.image, c);
    ASSERT_TRUE(in.ok()) << in.status().message();
    EXPECT_EQ(in->grid_x, k.grid_x);
    EXPECT_EQ(in->grid_y, k.grid_y);
    ASSERT_EQ(in->pixels.size(), k.passes.size());
    for (size_t i = 0; i < k.passes.size(); ++i) {
      std::vector<float> want;
      ASSERT_TRUE(NormalizePlanar(k.passes[i].input, ImageNorm{c.image_mean, c.image_std}, &want).ok());
      size_t diff = 0;
      for (size_t j = 0; j < want.size(); ++j) diff += in->pixels[i][j] != want[j];
      EXPECT_EQ(diff, 0u) << "tower input " << i << ": values unlike Pillow's";
    }
  }
}

TEST_P(VisionFamily, EmbeddingsMatchLlamaCpp) {
  auto m = VisionModel::Open(f_.path);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const VisionConfig& c = (*m)->config;
  auto enc = cpu::CreateCpuVisionEncoder(c, (*m)->weights, 2);
  ASSERT_TRUE(enc.ok()) << enc.status().message();
  size_t n_passes = 0;
  for (const Case& k : f_.cases) {
    SCOPED_TRACE(std::to_string(k.image.width) + "x" + std::to_string(k.image.height));
    auto in = PrepareForTower(k.image, c);
    ASSERT_TRUE(in.ok()) << in.status().message();
    ASSERT_EQ(in->pixels.size(), k.passes.size());
    for (size_t i = 0; i < k.passes.size(); ++i) {
      SCOPED_TRACE("pass " + std::to_string(i));
      const Pass& p = k.passes[i];
      ASSERT_EQ((*enc)->n_tokens(), p.n_tokens);
      std::vector<float> out(p.ref.size());
      Status st = (*enc)->Encode(in->pixels[i], out.data());
      ASSERT_TRUE(st.ok()) << st.message();
      const RelDiff d = CompareRel(out.data(), p.ref.data(), out.size(), kRelTol);
      EXPECT_EQ(d.bad, 0u) << "worst relative difference " << d.worst;
      EXPECT_LE(d.norm, kNormTol) << "worst relative difference " << d.worst;
      ++n_passes;
    }
  }
  EXPECT_GE(n_passes, f_.cases.size());
}

// The family's file damaged one way at a time (same-length renames keep it a
// valid GGUF): a clear status, never a crash or a silently different tower.
TEST_P(VisionFamily, DamagedFilesRefused) {
  const std::string good = ReadFile(f_.path);
  ASSERT_FALSE(good.empty());
  auto patched = [&](const std::string& from, const std::string& to) { return Patched(good, from, to); };
  const auto open = OpenProjectorBytes;
  EXPECT_TRUE(open(good).ok());
  if (f_.name == "idefics3") {
    // an older conversion (no longest edge): tiled another way, not built
    EXPECT_EQ(open(patched("clip.vision.preproc_image_size", "clip.vision.preproc_image_sizX")).code(),
              LLM_ERR_UNSUPPORTED);
    EXPECT_EQ(open(patched("clip.vision.projector.scale_factor", "clip.vision.projector.scale_factoX")).code(),
              LLM_ERR_MODEL_FORMAT);
    EXPECT_EQ(open(patched("mm.model.fc.weight", "mm.model.fX.weight")).code(), LLM_ERR_MODEL_FORMAT);
    EXPECT_EQ(open(patched("v.post_ln.weight", "v.post_lX.weight")).code(), LLM_ERR_MODEL_FORMAT);  // SigLIP's needs it
  } else {
    // without its class token the position table is one row too long
    EXPECT_EQ(open(patched("v.class_embd", "v.class_embX")).code(), LLM_ERR_MODEL_FORMAT);
    EXPECT_EQ(open(patched("mm.2.weight", "mm.3.weight")).code(), LLM_ERR_UNSUPPORTED);  // an mlp_norm part
    EXPECT_EQ(open(patched("mm.0.bias", "mm.0.biaX")).code(), LLM_ERR_MODEL_FORMAT);
  }
  EXPECT_NE(open(good.substr(0, good.size() / 2)).code(), LLM_OK);  // truncated
  auto m = VisionModel::Open(f_.path);
  ASSERT_TRUE(m.ok());
  auto enc = cpu::CreateCpuVisionEncoder((*m)->config, (*m)->weights, 1);
  ASSERT_TRUE(enc.ok());
  std::vector<float> out(static_cast<size_t>((*enc)->n_tokens()) * (*enc)->n_embd_out());
  EXPECT_EQ((*enc)->Encode(std::vector<float>(10), out.data()).code(), LLM_ERR_INVALID_ARGUMENT);
}

INSTANTIATE_TEST_SUITE_P(Families, VisionFamily, ::testing::Values("idefics3", "mlp"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

// Pictures the tiling cannot take: a clear status, nothing allocated for them.
TEST(VisionTiling, ImpossiblePicturesRefused) {
  RgbImage strip;  // 1 x 4000: the short side rounds to 0 at a longest edge of 80
  strip.width = 4000;
  strip.height = 1;
  strip.rgb.assign(4000 * 3, 7);
  EXPECT_EQ(TileLongestEdge(strip, 32, 80).status().code(), LLM_ERR_INVALID_ARGUMENT);
  RgbImage huge;
  huge.width = huge.height = 100000;
  EXPECT_EQ(TileLongestEdge(huge, 32, 80).status().code(), LLM_ERR_INVALID_ARGUMENT);
  RgbImage ok;
  ok.width = 10;
  ok.height = 10;
  ok.rgb.assign(300, 1);
  EXPECT_EQ(TileLongestEdge(ok, 32, 16000).status().code(), LLM_ERR_INVALID_ARGUMENT);  // 500 x 500 tiles
  EXPECT_EQ(TileLongestEdge(ok, 0, 80).status().code(), LLM_ERR_INVALID_ARGUMENT);
  auto t = TileLongestEdge(ok, 32, 80);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->grid_x, 3);
  EXPECT_EQ(t->grid_y, 3);
  EXPECT_EQ(t->tiles.size(), 9u);
}

}  // namespace
}  // namespace llm::test
