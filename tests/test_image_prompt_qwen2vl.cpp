// Qwen2.5-VL's text side against llama.cpp: the tiny synthesized qwen2vl
// text model (Qwen2's block with M-RoPE sections 2/3/3 of its 8 rotated
// pairs) and its Qwen2.5-VL projector (llm-synth --shape tiny-qwen2vl
// --mmproj) run prompts of text, pictures at their own size and text, and a
// text-only prompt; llama.cpp's libmtmd + libllama recorded the logits of
// the last text piece's positions, a greedy continuation and the logits
// after each of its tokens, each picture's grid (nx x ny merged cells) and
// the prompt's slots and positions (tests/data/vision/prompt_qwen2vl.*,
// written by tools/vision_prompt_reference.py --family qwen2vl).
//
// The pictures' grids are 4 x 2, 2 x 5 and 9 x 3: nx != ny both ways, so
// the text after a picture resuming at p0 + max(nx, ny) is exercised
// (core/mrope_positions.h). The backend test also runs two wrong
// position schemes and shows them fail: 1D positions for the image tokens
// (the acceptance tolerance, 1e-3, missed 4 to 7 times over) and the h / w
// sections swapped (kImageTol below).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/vision_encoder.h"
#include "core/mrope_positions.h"
#include "llm.h"
#include "model/model.h"
#include "model/vision_weights.h"
#include "support/api_greedy.h"
#include "support/capi_image_prompt.h"
#include "support/real_models.h"
#include "support/rel_diff.h"
#include "support/vision_reference.h"
#include "util/json.h"
#include "vision/image.h"
#include "vision/image_prep.h"

namespace llm::test {
namespace {

constexpr double kRelTol = 1e-3;  // |a - b| <= tol * max(|b|, 1), as tests/test_families.cpp
// This model's h and w sections turn slowly (rope base 1e6 over 8 pairs:
// the h pairs 2-4, the w pairs 5-7), so swapping them moves its logits by
// only 6e-5 to 2.3e-4 (the 9 x 3 grid most): prompts with pictures are also
// held to 1e-4 (measured: at most 3.3e-5), which the swap misses.
constexpr double kImageTol = 1e-4;
constexpr int32_t kBlock = 16;
constexpr int32_t kTop = 5;  // log-probabilities compared per generated token

struct Piece {
  std::vector<int32_t> tokens;
  int image = -1;              // picture index, or -1
  int32_t nx = 0, ny = 0, n_pos = 0;  // llama.cpp's grid of the picture
};

struct RefCase {
  std::string text;
  std::vector<int> pictures;  // in order of appearance
  std::vector<Piece> pieces;
  int32_t n_prompt = 0, n_prompt_pos = 0;
  std::vector<float> tail_logits;    // (n_tail, n_vocab)
  std::vector<int32_t> greedy;       // (G)
  std::vector<float> greedy_logits;  // (G - 1, n_vocab)
};

// The case's image spans as the engine lays them out (ImageSpan: first
// slot, n = nx * ny, nx, n_pos), from llama.cpp's grids.
std::vector<ImageSpan> SpansOf(const RefCase& k) {
  std::vector<ImageSpan> spans;
  int32_t slot = 0;
  for (const Piece& p : k.pieces) {
    if (p.image < 0) {
      slot += static_cast<int32_t>(p.tokens.size());
      continue;
    }
    spans.push_back({slot, p.nx * p.ny, 0, p.nx, p.n_pos});
    slot += p.nx * p.ny;
  }
  return spans;
}

class Qwen2VLPrompt : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    VisionReference r;
    ASSERT_NO_FATAL_FAILURE(LoadVisionReference("prompt_qwen2vl", &r));
    ref_ = new Json(std::move(r.json));
    ASSERT_TRUE(ref_->Find("mrope")->as_bool());
    ASSERT_FALSE(ref_->Find("both_ways")->as_bool());
    n_vocab_ = static_cast<int32_t>(ref_->Find("n_vocab")->as_int());
    text_path_ = new std::string(TempModelPath("qwen2vl_prompt", "_text.gguf"));
    proj_path_ = new std::string(TempModelPath("qwen2vl_prompt", "_mmproj.gguf"));
    ASSERT_NO_FATAL_FAILURE(
        SynthesizeReferencePair(*ref_, *text_path_, *proj_path_, "tools/vision_prompt_reference.py"));

    rgbs_ = new std::vector<RgbImage>();
    for (const Json& p : ref_->Find("pictures")->array()) {
      RgbImage img;
      r.TakePicture(p, &img);
      rgbs_->push_back(std::move(img));
    }
    cases_ = new std::vector<RefCase>();
    for (const Json& c : ref_->Find("cases")->array()) {
      RefCase k;
      k.text = c.Find("text")->as_string();
      int32_t n_tail = 0;
      for (const Json& p : c.Find("pieces")->array()) {
        Piece piece;
        if (const Json* t = p.Find("tokens"); t != nullptr) {
          piece.tokens = JsonInts(*t);
          n_tail = static_cast<int32_t>(piece.tokens.size());
        } else {
          piece.image = static_cast<int>(p.Find("image")->as_int());
          piece.nx = static_cast<int32_t>(p.Find("nx")->as_int());
          piece.ny = static_cast<int32_t>(p.Find("ny")->as_int());
          piece.n_pos = static_cast<int32_t>(p.Find("n_pos")->as_int());
          k.pictures.push_back(piece.image);
        }
        k.pieces.push_back(std::move(piece));
      }
      k.n_prompt = static_cast<int32_t>(c.Find("n_prompt")->as_int());
      k.n_prompt_pos = static_cast<int32_t>(c.Find("n_prompt_pos")->as_int());
      k.greedy = JsonInts(*c.Find("greedy"));
      r.TakeFloats(c.Find("tail_logits_offset")->as_int(), static_cast<size_t>(n_tail) * n_vocab_, &k.tail_logits);
      r.TakeFloats(c.Find("greedy_logits_offset")->as_int(), (k.greedy.size() - 1) * static_cast<size_t>(n_vocab_),
                   &k.greedy_logits);
      cases_->push_back(std::move(k));
    }
    ASSERT_GE(cases_->size(), 4u);
  }
  static void TearDownTestSuite() {
    if (text_path_ != nullptr) std::remove(text_path_->c_str());
    if (proj_path_ != nullptr) std::remove(proj_path_->c_str());
    delete text_path_;
    delete proj_path_;
    delete rgbs_;
    delete cases_;
    delete ref_;
    text_path_ = proj_path_ = nullptr;
    rgbs_ = nullptr;
    cases_ = nullptr;
    ref_ = nullptr;
  }

  // The last text piece's rows then each greedy token's, as llama.cpp's.
  static std::vector<float> Want(const RefCase& k) {
    std::vector<float> w = k.tail_logits;
    w.insert(w.end(), k.greedy_logits.begin(), k.greedy_logits.end());
    return w;
  }

  static Json* ref_;
  static std::string* text_path_;
  static std::string* proj_path_;
  static std::vector<RgbImage>* rgbs_;
  static std::vector<RefCase>* cases_;
  static int32_t n_vocab_;
};

Json* Qwen2VLPrompt::ref_ = nullptr;
std::string* Qwen2VLPrompt::text_path_ = nullptr;
std::string* Qwen2VLPrompt::proj_path_ = nullptr;
std::vector<RgbImage>* Qwen2VLPrompt::rgbs_ = nullptr;
std::vector<RefCase>* Qwen2VLPrompt::cases_ = nullptr;
int32_t Qwen2VLPrompt::n_vocab_ = 0;

// The positions: the example of core/mrope_positions.h, and each case's
// slots and positions as llama.cpp counted them.
TEST_F(Qwen2VLPrompt, PositionsAreLibmtmds) {
  const std::vector<ImageSpan> one = {{3, 6, 0, 3, 3}};  // a 3 x 2 grid at slot 3
  int32_t p[11 * 3];
  MropePositions(one, 0, 11, p);
  const int32_t want[11][3] = {{0, 0, 0}, {1, 1, 1}, {2, 2, 2}, {3, 3, 3}, {3, 3, 4}, {3, 3, 5},
                               {3, 4, 3}, {3, 4, 4}, {3, 4, 5}, {6, 6, 6}, {7, 7, 7}};
  for (int j = 0; j < 11; ++j)
    for (int d = 0; d < 3; ++d) EXPECT_EQ(p[3 * j + d], want[j][d]) << "slot " << j << " axis " << d;
  int32_t tail[2 * 3];  // a slice starting mid-sequence gives the same
  MropePositions(one, 8, 2, tail);
  EXPECT_EQ(std::vector<int32_t>(tail, tail + 6), std::vector<int32_t>({3, 4, 5, 6, 6, 6}));

  bool wide = false, tall = false;
  for (const RefCase& k : *cases_) {
    SCOPED_TRACE(k.text);
    const std::vector<ImageSpan> spans = SpansOf(k);
    int32_t last[3];
    MropePositions(spans, k.n_prompt - 1, 1, last);
    EXPECT_EQ(last[0] + 1, k.n_prompt_pos);  // the next token's position, as llama.cpp's n_past
    for (const ImageSpan& s : spans) {
      wide |= s.nx > s.n / s.nx;
      tall |= s.nx < s.n / s.nx;
    }
  }
  EXPECT_TRUE(wide && tall) << "the reference should hold grids with nx > ny and nx < ny";

  // the C API's preprocessing gives llama.cpp's grids
  auto vm = VisionModel::Open(*proj_path_);
  ASSERT_TRUE(vm.ok()) << vm.status().message();
  for (const RefCase& k : *cases_)
    for (const Piece& p : k.pieces) {
      if (p.image < 0) continue;
      auto in = PrepareForTower((*rgbs_)[p.image], (*vm)->config);
      ASSERT_TRUE(in.ok()) << in.status().message();
      EXPECT_EQ(in->width / (*vm)->config.size_align(), p.nx);
      EXPECT_EQ(in->height / (*vm)->config.size_align(), p.ny);
    }
}

// The backend alone, the prompt in one batch and each greedy token after
// it, with M-RoPE positions as the engine makes them, and two wrong ones.
enum class Variant { kAsLlamaCpp, k1DImagePositions, kSectionsSwapped };

std::vector<float> BackendLogits(Backend& b, const ModelConfig& mc, const RefCase& k,
                                 const std::vector<std::vector<float>>& rows, Variant v) {
  std::vector<int32_t> tokens;
  std::vector<const float*> embd;
  int32_t n_tail = 0, pic = 0;
  for (const Piece& p : k.pieces) {
    for (int32_t t : p.tokens) {
      tokens.push_back(t);
      embd.push_back(nullptr);
    }
    n_tail = static_cast<int32_t>(p.tokens.size());
    if (p.image < 0) continue;
    const std::vector<float>& r = rows[static_cast<size_t>(pic++)];
    EXPECT_EQ(r.size(), static_cast<size_t>(p.nx * p.ny) * mc.n_embd);
    for (int32_t j = 0; j < p.nx * p.ny; ++j) {
      tokens.push_back(0);
      embd.push_back(r.data() + static_cast<size_t>(j) * mc.n_embd);
    }
  }
  const int32_t n_prompt = static_cast<int32_t>(tokens.size());
  EXPECT_EQ(n_prompt, k.n_prompt);
  const int32_t n_all = n_prompt + static_cast<int32_t>(k.greedy.size());
  std::vector<ImageSpan> spans = SpansOf(k);
  if (v == Variant::k1DImagePositions)
    for (ImageSpan& s : spans) s.nx = s.n_pos = 0;  // every slot its own position
  std::vector<int32_t> pos(static_cast<size_t>(n_all) * 3);
  MropePositions(spans, 0, n_all, pos.data());
  if (v == Variant::kSectionsSwapped)
    for (int32_t j = 0; j < n_all; ++j) std::swap(pos[3 * j + 1], pos[3 * j + 2]);
  std::vector<int32_t> table;
  for (int32_t i = 0; i * kBlock < n_all; ++i) table.push_back(i);
  const int64_t V = mc.n_vocab;
  std::vector<float> out(static_cast<size_t>(n_tail + k.greedy.size() - 1) * V);
  std::vector<int32_t> wanted;
  for (int32_t i = n_prompt - n_tail; i < n_prompt; ++i) wanted.push_back(i);
  const BatchSeq seq{0, n_prompt, 0, table};
  Batch batch{tokens, std::span<const BatchSeq>(&seq, 1), wanted, embd, {},
              std::span<const int32_t>(pos.data(), static_cast<size_t>(n_prompt) * 3)};
  Status st = b.Forward(batch, out.data());
  EXPECT_TRUE(st.ok()) << st.message();
  for (size_t g = 0; g + 1 < k.greedy.size(); ++g) {
    const int32_t tok = k.greedy[g], row = 0, at = n_prompt + static_cast<int32_t>(g);
    const BatchSeq one{0, 1, at, table};
    Batch step{std::span<const int32_t>(&tok, 1), std::span<const BatchSeq>(&one, 1), std::span<const int32_t>(&row, 1)};
    step.mrope_pos = std::span<const int32_t>(pos.data() + 3 * at, 3);
    st = b.Forward(step, out.data() + (n_tail + g) * V);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return out;
}

TEST_F(Qwen2VLPrompt, BackendLogitsMatchLlamaCpp) {
  auto m = Model::Load(text_path_->c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  const ModelConfig& mc = (*m)->config;
  ASSERT_EQ(mc.n_vocab, n_vocab_);
  ASSERT_TRUE(mc.mrope());
  auto vm = VisionModel::Open(*proj_path_);
  ASSERT_TRUE(vm.ok());
  auto enc = cpu::CreateCpuVisionEncoder((*vm)->config, (*vm)->weights, 2);
  ASSERT_TRUE(enc.ok());
  double worst_swapped = 0.0;  // over the cases with pictures
  for (size_t c = 0; c < cases_->size(); ++c) {
    const RefCase& k = (*cases_)[c];
    SCOPED_TRACE("case " + std::to_string(c) + ": " + k.text);
    std::vector<std::vector<float>> rows;
    for (int i : k.pictures) {
      auto in = PrepareForTower((*rgbs_)[i], (*vm)->config);
      ASSERT_TRUE(in.ok());
      rows.emplace_back(static_cast<size_t>((*enc)->n_tokens_for(in->width, in->height)) * mc.n_embd);
      ASSERT_TRUE((*enc)->EncodeSized(in->pixels[0], in->width, in->height, rows.back().data()).ok());
    }
    const std::vector<float> want = Want(k);
    double worst[3];
    for (Variant v : {Variant::kAsLlamaCpp, Variant::k1DImagePositions, Variant::kSectionsSwapped}) {
      auto b = CreateCpuBackend(mc, (*m)->weights, KvCacheSpec{kBlock, 16, 256}, 2);
      ASSERT_TRUE(b.ok());
      const std::vector<float> got = BackendLogits(**b, mc, k, rows, v);
      ASSERT_EQ(got.size(), want.size());
      worst[static_cast<int>(v)] = CompareRel(got.data(), want.data(), got.size(), kRelTol).worst;
    }
    std::printf("case %zu: worst relative logit difference %.3g (1D image positions: %.3g; h and w swapped: %.3g)\n",
                c, worst[0], worst[1], worst[2]);
    EXPECT_LE(worst[0], kRelTol);
    if (k.pictures.empty()) continue;  // text only: every variant is (p, p, p)
    EXPECT_LE(worst[0], kImageTol);
    EXPECT_GT(worst[1], kRelTol);  // 1D positions miss the acceptance tolerance itself
    worst_swapped = std::max(worst_swapped, worst[2]);
  }
  EXPECT_GT(worst_swapped, kImageTol);
}

// Through the C API: the prompt as text and raw-RGB parts, as llama.cpp got
// text and bitmaps; the greedy tokens, the prompt's slot count, and the
// log-probabilities of each step's 5 most likely tokens (from llama.cpp's
// logits; this random model repeats one token, so the greedy tokens alone
// would say little) agree, the
// prompt in one step and in steps of at most 30 tokens (the 27-cell picture
// in one of them, the text around it split).
TEST_F(Qwen2VLPrompt, CapiPartsMatchLlamaCpp) {
  for (int32_t budget : {0, 30}) {
    llm_ctx_params p = ReferenceCtxParams(text_path_->c_str(), proj_path_->c_str());
    p.n_ctx = 512;
    p.max_batch_tokens = budget;
    llm_ctx* ctx = nullptr;
    ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
    double worst_lp = 0.0;
    for (size_t c = 0; c < cases_->size(); ++c) {
      const RefCase& k = (*cases_)[c];
      SCOPED_TRACE("budget " + std::to_string(budget) + " case " + std::to_string(c) + ": " + k.text);
      std::vector<const RgbImage*> shown;
      for (int i : k.pictures) shown.push_back(&(*rgbs_)[static_cast<size_t>(i)]);
      ImagePromptParts prompt;
      ASSERT_NO_FATAL_FAILURE(prompt.Build(k.text, shown));
      const ApiGreedyRun run = ApiGreedyRequest(ctx, prompt.Request(), static_cast<int>(k.greedy.size()), kTop);
      ASSERT_EQ(run.status, LLM_OK) << llm_last_error();
      EXPECT_EQ(run.metrics.prompt_tokens, k.n_prompt);  // slots: an image costs nx * ny of the context
      ASSERT_EQ(std::vector<int32_t>(run.tokens.begin(), run.tokens.end()), k.greedy);
      ASSERT_EQ(run.top.size(), k.greedy.size());
      const std::vector<float> want = Want(k);
      const size_t n_tail = k.tail_logits.size() / n_vocab_;
      for (size_t g = 0; g < k.greedy.size(); ++g) {
        const float* row = want.data() + (n_tail - 1 + g) * n_vocab_;
        double mx = row[0], sum = 0.0;
        for (int32_t i = 0; i < n_vocab_; ++i) mx = std::max(mx, static_cast<double>(row[i]));
        for (int32_t i = 0; i < n_vocab_; ++i) sum += std::exp(row[i] - mx);
        ASSERT_EQ(run.top[g].size(), static_cast<size_t>(kTop));
        for (const llm_top_logprob& t : run.top[g]) {  // the synthetic model's greedy tokens repeat: the
          const double lp = row[t.token] - mx - std::log(sum);  // top 5 check its distribution
          EXPECT_NEAR(t.logprob, lp, kRelTol * std::max(std::fabs(lp), 1.0)) << "token " << g << " id " << t.token;
          worst_lp = std::max(worst_lp, std::fabs(t.logprob - lp));
        }
        EXPECT_EQ(run.top[g][0].token, k.greedy[g]);
      }
    }
    std::printf("budget %d: worst log-probability difference %.3g\n", budget, worst_lp);
    EXPECT_LE(worst_lp, kImageTol);  // measured 3.3e-5; 1D image positions: 2.7e-3
    llm_ctx_destroy(ctx);
  }
}

// KV streams address blocks by token ids and the cache salt alone: on a
// prompt with a picture they reach the text blocks before it (whose
// positions are their slots) and stop there, never carrying a block whose
// positions the picture moved.
TEST_F(Qwen2VLPrompt, KvExportStopsBeforeThePicture) {
  const RefCase& k = (*cases_)[0];
  ASSERT_EQ(k.pictures.size(), 1u);
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = text_path_->c_str();
  p.mmproj_path = proj_path_->c_str();
  p.backend = LLM_BACKEND_CPU;
  p.n_threads = 2;
  p.n_ctx = 256;
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  ImagePromptParts prompt;
  ASSERT_NO_FATAL_FAILURE(prompt.Build(k.text, {&(*rgbs_)[static_cast<size_t>(k.pictures[0])]}));
  ASSERT_EQ(prompt.parts().size(), 3u);  // text, the picture, text
  const ApiGreedyRun run = ApiGreedyRequest(ctx, prompt.Request(), 2, 1, /*keep_kv=*/1);
  ASSERT_EQ(run.status, LLM_OK) << llm_last_error();
  // the prompt's ids as a caller could name them: text, then anything for the picture's slots
  std::vector<llm_token> ids;
  int32_t first_image_slot = -1;
  for (const Piece& piece : k.pieces) {
    if (piece.image >= 0) {
      first_image_slot = static_cast<int32_t>(ids.size());
      ids.insert(ids.end(), static_cast<size_t>(piece.nx * piece.ny), 0);
    } else {
      ids.insert(ids.end(), piece.tokens.begin(), piece.tokens.end());
    }
  }
  ASSERT_GE(first_image_slot, 16);  // at least one whole text block before it
  std::string stream;
  auto write = [](void* user, const void* data, size_t n) -> int32_t {
    static_cast<std::string*>(user)->append(static_cast<const char*>(data), n);
    return 0;
  };
  int32_t n_out = -1;
  ASSERT_EQ(llm_kv_export(ctx, ids.data(), static_cast<int32_t>(ids.size()), 0, write, &stream, &n_out), LLM_OK)
      << llm_last_error();
  EXPECT_GT(n_out, 0);                  // the text before the picture
  EXPECT_LE(n_out, first_image_slot);   // nothing the picture touched or moved
  llm_ctx_destroy(ctx);
}

// A qwen2vl model without a projector is a text model: the text-only
// case's tokens give llama.cpp's greedy tokens.
TEST_F(Qwen2VLPrompt, TextOnlyWithoutProjector) {
  const RefCase* text_only = nullptr;
  for (const RefCase& k : *cases_)
    if (k.pictures.empty()) text_only = &k;
  ASSERT_NE(text_only, nullptr);
  llm_ctx_params p = ReferenceCtxParams(text_path_->c_str(), nullptr);
  p.n_ctx = 256;
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  std::vector<llm_token> prompt;
  for (const Piece& piece : text_only->pieces) prompt.insert(prompt.end(), piece.tokens.begin(), piece.tokens.end());
  const ApiGreedyRun run = ApiGreedy(ctx, prompt, static_cast<int>(text_only->greedy.size()), 1);
  ASSERT_EQ(run.status, LLM_OK) << llm_last_error();
  EXPECT_EQ(std::vector<int32_t>(run.tokens.begin(), run.tokens.end()), text_only->greedy);
  llm_ctx_destroy(ctx);
}

// The CUDA backend does not run M-RoPE: the model is refused with the
// reason (AUTO falls back to the CPU on it, context_builder.cpp).
TEST_F(Qwen2VLPrompt, CudaRefusesMrope) {
  auto m = Model::Load(text_path_->c_str());
  ASSERT_TRUE(m.ok());
  const Status st = CudaSupportsModel((*m)->config);
  EXPECT_EQ(st.code(), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(st.message().find("M-RoPE"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace llm::test
