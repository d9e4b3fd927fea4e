// Images inside a prompt for the projector families beside Gemma 3
// (tests/test_image_prompt.cpp has Gemma 3's, with the backend- and
// engine-level checks), against llama.cpp: the tiny synthesized Llama text
// models with their projectors (llm-synth --mmproj; tiny-smolvlm with an
// Idefics3 projector, tiny-llava with a LLaVA CLIP + MLP one) run prompts of
// text, pictures and text through the C API (text and raw-RGB parts, as
// llama.cpp got text and bitmaps); llama.cpp's libmtmd + libllama recorded
// its prompt length and greedy continuation (tests/data/vision/prompt_<family>.*,
// written by tools/vision_prompt_reference.py --family). Equal prompt
// lengths and greedy tokens check together the pictures' preprocessing
// (Idefics3: tiles and overview), the tower and projector, the layout
// around the pictures (Idefics3: <fake_token_around_image><row_r_col_c>
// before each tile, "\n" between rows, "\n\n" <fake_token_around_image>
// <global-img> before the overview; LLaVA: none) and causal attention over
// the pictures' positions (llama.cpp decodes these families' spans causally,
// Gemma 3's both ways).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "llm.h"
#include "support/api_greedy.h"
#include "support/capi_image_prompt.h"
#include "support/real_models.h"
#include "support/vision_reference.h"
#include "util/json.h"
#include "vision/image.h"

namespace llm::test {
namespace {

struct RefCase {
  std::string text;           // pictures at <__media__>
  std::vector<int> pictures;  // the pictures shown, in order
  int32_t n_prompt = 0;
  std::vector<int32_t> greedy;
};

class ImagePromptFamily : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string family = GetParam();
    VisionReference r;
    ASSERT_NO_FATAL_FAILURE(LoadVisionReference("prompt_" + family, &r));
    const Json& ref = r.json;
    EXPECT_FALSE(ref.Find("both_ways")->as_bool());
    text_path_ = TempModelPath("prompt_" + family, "_text.gguf");
    proj_path_ = TempModelPath("prompt_" + family, "_mmproj.gguf");
    ASSERT_NO_FATAL_FAILURE(SynthesizeReferencePair(ref, text_path_, proj_path_, "tools/vision_prompt_reference.py"));
    for (const Json& p : ref.Find("pictures")->array()) {
      RgbImage img;
      ASSERT_NO_FATAL_FAILURE(r.TakePicture(p, &img));
      pictures_.push_back(std::move(img));
    }
    for (const Json& c : ref.Find("cases")->array()) {
      RefCase k;
      k.text = c.Find("text")->as_string();
      for (const Json& p : c.Find("pieces")->array()) {
        const Json* im = p.Find("image");
        const Json* tile = p.Find("tile");
        if (im != nullptr && (tile == nullptr || tile->as_int() == 0)) k.pictures.push_back(static_cast<int>(im->as_int()));
      }
      k.n_prompt = static_cast<int32_t>(c.Find("n_prompt")->as_int());
      k.greedy = JsonInts(*c.Find("greedy"));
      cases_.push_back(std::move(k));
    }
    ASSERT_GE(cases_.size(), 3u);
  }
  void TearDown() override {
    std::remove(text_path_.c_str());
    std::remove(proj_path_.c_str());
  }

  std::string text_path_, proj_path_;
  std::vector<RgbImage> pictures_;
  std::vector<RefCase> cases_;
};

TEST_P(ImagePromptFamily, CapiPartsGreedyMatchesLlamaCpp) {
  llm_ctx_params p = ReferenceCtxParams(text_path_.c_str(), proj_path_.c_str());
  p.n_ctx = 1024;
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  for (size_t c = 0; c < cases_.size(); ++c) {
    const RefCase& k = cases_[c];
    SCOPED_TRACE("case " + std::to_string(c) + ": " + k.text);
    std::vector<const RgbImage*> shown;
    for (int i : k.pictures) shown.push_back(&pictures_[static_cast<size_t>(i)]);
    ImagePromptParts prompt;
    ASSERT_NO_FATAL_FAILURE(prompt.Build(k.text, shown));
    const ApiGreedyRun run = ApiGreedyRequest(ctx, prompt.Request(), static_cast<int>(k.greedy.size()));
    ASSERT_EQ(run.status, LLM_OK) << llm_last_error();
    EXPECT_EQ(run.metrics.prompt_tokens, k.n_prompt);  // the pictures' positions and layout tokens count
    EXPECT_EQ(std::vector<int32_t>(run.tokens.begin(), run.tokens.end()), k.greedy);
  }
  llm_ctx_destroy(ctx);
}

INSTANTIATE_TEST_SUITE_P(Families, ImagePromptFamily, ::testing::Values("idefics3", "mlp"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
}  // namespace llm::test
