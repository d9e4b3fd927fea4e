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

#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#include "llm.h"
#include "support/api_greedy.h"
#include "support/real_models.h"
#include "support/test_paths.h"
#include "synth_mmproj.h"
#include "synth_model.h"
#include "util/json.h"
#include "vision/image.h"

namespace llm::test {
namespace {

std::string Fnv1a64Hex(const std::string& data) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : data) h = (h ^ c) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

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
    const Json ref = LoadReferenceJson("vision/prompt_" + family);
    const std::string bin = ReadFile(DataDir() + "/vision/prompt_" + family + ".bin");
    ASSERT_FALSE(bin.empty()) << "tests/data/vision/prompt_" << family << ".bin";
    EXPECT_FALSE(ref.Find("both_ways")->as_bool());
    synth::SynthOptions o;
    std::string shape;
    const std::vector<Json>& args = ref.Find("synth_args")->array();
    for (size_t i = 0; i + 1 < args.size(); i += 2) {
      const std::string key = args[i].as_string(), v = args[i + 1].as_string();
      if (key == "--shape") shape = v;
      else if (key == "--type") o.type = v == "f32" ? TensorType::F32 : v == "f16" ? TensorType::F16 : TensorType::BF16;
      else if (key == "--seed") o.seed = std::stoull(v);
      else ADD_FAILURE() << "unknown llm-synth argument " << key;
    }
    const std::string base = ::testing::TempDir() + "/llmrt_prompt_" + family + "_" + std::to_string(::getpid());
    text_path_ = base + "_text.gguf";
    proj_path_ = base + "_mmproj.gguf";
    const synth::SynthShape* ts = synth::FindSynthShape(shape);
    const synth::SynthVisionShape* vs = synth::FindSynthVisionShape(shape);
    ASSERT_TRUE(ts != nullptr && vs != nullptr) << shape;
    ASSERT_TRUE(synth::WriteSynthModel(*ts, o, text_path_).ok());
    ASSERT_TRUE(synth::WriteSynthMmproj(*vs, o, proj_path_).ok());
    EXPECT_EQ(Fnv1a64Hex(ReadFile(text_path_)), ref.Find("text_fnv1a64")->as_string())
        << "llm-synth no longer writes the text model llama.cpp ran (regenerate with tools/vision_prompt_reference.py)";
    EXPECT_EQ(Fnv1a64Hex(ReadFile(proj_path_)), ref.Find("mmproj_fnv1a64")->as_string());
    for (const Json& p : ref.Find("pictures")->array()) {
      RgbImage img;
      img.width = static_cast<int32_t>(p.Find("width")->as_int());
      img.height = static_cast<int32_t>(p.Find("height")->as_int());
      img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);
      const size_t off = static_cast<size_t>(p.Find("rgb_offset")->as_int());
      ASSERT_LE(off + img.rgb.size(), bin.size());
      std::memcpy(img.rgb.data(), bin.data() + off, img.rgb.size());
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
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = text_path_.c_str();
  p.mmproj_path = proj_path_.c_str();
  p.backend = LLM_BACKEND_CPU;
  p.kv_type = LLM_KV_F32;  // as the reference
  p.n_threads = 2;
  p.n_ctx = 1024;
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  for (size_t c = 0; c < cases_.size(); ++c) {
    const RefCase& k = cases_[c];
    SCOPED_TRACE("case " + std::to_string(c) + ": " + k.text);
    std::vector<std::string> texts;  // the text around the markers
    for (size_t at = 0;;) {
      const size_t m = k.text.find("<__media__>", at);
      texts.push_back(k.text.substr(at, m == std::string::npos ? std::string::npos : m - at));
      if (m == std::string::npos) break;
      at = m + std::strlen("<__media__>");
    }
    ASSERT_EQ(texts.size(), k.pictures.size() + 1);
    std::vector<llm_content_part> parts;
    for (size_t i = 0; i < texts.size(); ++i) {
      llm_content_part t;
      llm_content_part_init(&t);
      t.kind = LLM_CONTENT_TEXT;
      t.text = texts[i].c_str();
      if (!texts[i].empty()) parts.push_back(t);
      if (i == k.pictures.size()) break;
      const RgbImage& img = pictures_[static_cast<size_t>(k.pictures[i])];
      llm_content_part im;
      llm_content_part_init(&im);
      im.kind = LLM_CONTENT_IMAGE_RGB;
      im.data = img.rgb.data();
      im.n_data = img.rgb.size();
      im.width = img.width;
      im.height = img.height;
      parts.push_back(im);
    }
    llm_request r;
    llm_request_init(&r);
    r.parts = parts.data();
    r.n_parts = static_cast<int32_t>(parts.size());
    r.tokenize_flags = LLM_TOKENIZE_ADD_SPECIAL | LLM_TOKENIZE_PARSE_SPECIAL;
    const ApiGreedyRun run = ApiGreedyRequest(ctx, r, static_cast<int>(k.greedy.size()));
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
