// Images inside a prompt (issue 36, the engine's part), against llama.cpp:
// the tiny synthesized Gemma 3 text model and its projector (llm-synth
// --mmproj) run prompts of text, images and text; llama.cpp's libmtmd +
// libllama recorded the logits of the last text piece's positions and a
// greedy continuation (tests/data/vision/prompt.*, written by
// tools/vision_prompt_reference.py).
//   * Backend: an image's soft tokens enter as embedding rows (Batch::embd)
//     with no sqrt(n_embd) scale and see their whole span (Batch::attn_end);
//     every logit within 1e-3 relative of llama.cpp's. Each of the two
//     choices, turned the other way, moves the logits far beyond that.
//   * Engine: greedy continuations identical to llama.cpp's, whole and with
//     chunked prefill cut around the images; the same image twice is encoded
//     once (ImageStats) and its blocks come from the prefix cache; another
//     image at the same place is never matched; parallel samples fork from
//     an image prompt; a preempted image prompt recomputes.
//   * Refusals: a context without a projector, wrong pixel counts, bad
//     pieces, an image longer than a step, prompt logprobs.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/vision_encoder.h"
#include "engine/engine.h"
#include "engine/image_input.h"
#include "model/model.h"
#include "model/vision_weights.h"
#include "support/api_greedy.h"
#include "support/capi_image_prompt.h"
#include "support/real_models.h"
#include "support/rel_diff.h"
#include "support/vision_reference.h"
#include "util/json.h"
#include "vision/image_preprocess.h"

namespace llm::test {
namespace {

constexpr double kRelTol = 1e-3;  // |a - b| <= tol * max(|b|, 1), as tests/test_families.cpp
constexpr int32_t kBlock = 16;

struct RefCase {
  std::string text;                  // the prompt llama.cpp tokenized, pictures at <__media__>
  std::vector<PromptPiece> pieces;
  int32_t n_prompt = 0;
  std::vector<float> tail_logits;    // (n_tail, n_vocab) the last text piece's positions
  std::vector<int32_t> greedy;       // (G)
  std::vector<float> greedy_logits;  // (G - 1, n_vocab) after each greedy token but the last
};

class ImagePrompt : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    VisionReference r;
    ASSERT_NO_FATAL_FAILURE(LoadVisionReference("prompt", &r));
    ref_ = new Json(std::move(r.json));
    n_vocab_ = static_cast<int32_t>(ref_->Find("n_vocab")->as_int());
    // the models llama.cpp ran, rebuilt and checked byte for byte
    text_path_ = new std::string(TempModelPath("image_prompt", "_text.gguf"));
    proj_path_ = new std::string(TempModelPath("image_prompt", "_mmproj.gguf"));
    ASSERT_NO_FATAL_FAILURE(
        SynthesizeReferencePair(*ref_, *text_path_, *proj_path_, "tools/vision_prompt_reference.py"));

    // the pictures, preprocessed as the C API will (vision/image_preprocess.h)
    auto vm = VisionModel::Open(*proj_path_);
    ASSERT_TRUE(vm.ok()) << vm.status().message();
    const VisionConfig& vc = (*vm)->config;
    images_ = new std::vector<ImageInput>();
    rgbs_ = new std::vector<RgbImage>();
    for (const Json& p : ref_->Find("pictures")->array()) {
      RgbImage img;
      r.TakePicture(p, &img);
      ImageInput in{{}, vc.image_size, vc.image_size, 0};
      ASSERT_TRUE(PreprocessFixedSize(img, vc.image_size, ImageNorm{vc.image_mean, vc.image_std}, &in.pixels).ok());
      in.hash = 0x5EED0000ull + images_->size();  // the C API hashes the pixels; any distinct values serve here
      images_->push_back(std::move(in));
      rgbs_->push_back(std::move(img));
    }
    cases_ = new std::vector<RefCase>();
    for (const Json& c : ref_->Find("cases")->array()) {
      RefCase k;
      k.text = c.Find("text")->as_string();
      int32_t n_tail = 0;
      for (const Json& p : c.Find("pieces")->array()) {
        PromptPiece piece;
        if (const Json* t = p.Find("tokens"); t != nullptr) {
          piece.tokens = JsonInts(*t);
          n_tail = static_cast<int32_t>(piece.tokens.size());
        } else {
          piece.image = static_cast<int>(p.Find("image")->as_int());
        }
        k.pieces.push_back(std::move(piece));
      }
      k.n_prompt = static_cast<int32_t>(c.Find("n_prompt")->as_int());
      k.greedy = JsonInts(*c.Find("greedy"));
      r.TakeFloats(c.Find("tail_logits_offset")->as_int(), static_cast<size_t>(n_tail) * n_vocab_, &k.tail_logits);
      r.TakeFloats(c.Find("greedy_logits_offset")->as_int(), (k.greedy.size() - 1) * static_cast<size_t>(n_vocab_),
                   &k.greedy_logits);
      cases_->push_back(std::move(k));
    }
    ASSERT_GE(cases_->size(), 3u);
  }
  static void TearDownTestSuite() {
    if (text_path_ != nullptr) std::remove(text_path_->c_str());
    if (proj_path_ != nullptr) std::remove(proj_path_->c_str());
    delete text_path_;
    delete proj_path_;
    delete images_;
    delete rgbs_;
    rgbs_ = nullptr;
    delete cases_;
    delete ref_;
    text_path_ = proj_path_ = nullptr;
    images_ = nullptr;
    cases_ = nullptr;
    ref_ = nullptr;
  }

  // A context (engine) with the projector attached.
  static std::unique_ptr<Engine> MakeEngine(int32_t max_batch_tokens, bool attach = true, int32_t n_blocks = 64) {
    auto m = Model::Load(text_path_->c_str());
    EXPECT_TRUE(m.ok()) << m.status().message();
    if (!m.ok()) return nullptr;
    auto b = CreateCpuBackend((*m)->config, (*m)->weights, KvCacheSpec{kBlock, n_blocks, 256}, 2);
    EXPECT_TRUE(b.ok()) << b.status().message();
    if (!b.ok()) return nullptr;
    EngineConfig ec;
    ec.n_ctx = 256;
    ec.n_blocks = n_blocks;
    ec.max_batch_tokens = max_batch_tokens;
    auto e = Engine::Create(std::move(*m), std::move(*b), ec);
    EXPECT_TRUE(e.ok()) << e.status().message();
    if (!e.ok()) return nullptr;
    if (attach) {
      auto vm = VisionModel::Open(*proj_path_);
      EXPECT_TRUE(vm.ok());
      Status st = (*e)->AttachVision(std::move(*vm), 2);
      EXPECT_TRUE(st.ok()) << st.message();
    }
    return std::move(*e);
  }

  static RequestSpec Greedy(const RefCase& k, int32_t max_tokens) {
    RequestSpec s;
    s.pieces = k.pieces;
    for (PromptPiece& p : s.pieces) {  // the pictures this prompt shows, in order of appearance
      if (p.image < 0) continue;
      s.images.push_back((*images_)[p.image]);
      p.image = static_cast<int>(s.images.size()) - 1;
    }
    s.sampling.temperature = 0.0f;
    s.max_tokens = max_tokens;
    s.ignore_eos = true;
    return s;
  }

  struct Result {
    std::vector<int32_t> tokens;
    llm_metrics metrics{};
    llm_status status = LLM_OK;
    std::string message;
  };
  static Result Run(Engine& e, RequestSpec spec) {
    Result r;
    auto id = e.Submit(std::move(spec));
    if (!id.ok()) {
      r.status = id.status().code();
      r.message = id.status().message();
      return r;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      llm_event ev[16];
      uint32_t n = 0;
      EXPECT_TRUE(e.Poll(ev, 16, sizeof(llm_event), &n, 1000).ok());
      for (uint32_t i = 0; i < n; ++i) {
        if (ev[i].request_id != *id) continue;
        if (ev[i].type == LLM_EVENT_TOKEN) r.tokens.push_back(ev[i].token);
        if (ev[i].type == LLM_EVENT_FINAL) {
          r.metrics = ev[i].metrics;
          r.status = ev[i].status;
          r.message = ev[i].message != nullptr ? ev[i].message : "";
          return r;
        }
      }
    }
    ADD_FAILURE() << "no final event within 60 s";
    return r;
  }

  static Json* ref_;
  static std::vector<RefCase>* cases_;
  static std::vector<ImageInput>* images_;
  static std::vector<RgbImage>* rgbs_;  // the pictures as llama.cpp got them
  static std::string* text_path_;
  static std::string* proj_path_;
  static int32_t n_vocab_;
};

Json* ImagePrompt::ref_ = nullptr;
std::vector<RefCase>* ImagePrompt::cases_ = nullptr;
std::vector<ImageInput>* ImagePrompt::images_ = nullptr;
std::vector<RgbImage>* ImagePrompt::rgbs_ = nullptr;
std::string* ImagePrompt::text_path_ = nullptr;
std::string* ImagePrompt::proj_path_ = nullptr;
int32_t ImagePrompt::n_vocab_ = 0;

// The backend alone: the prompt in one batch, then each greedy token. The
// logits of the last text piece and after each greedy token, as llama.cpp's
// rows are laid out: (n_tail + G - 1, n_vocab).
enum class Variant { kAsLlamaCpp, kScaledRows, kCausalImages };

std::vector<float> BackendLogits(Backend& b, const ModelConfig& mc, const RefCase& k,
                                 const std::vector<std::vector<float>>& rows, Variant v) {
  std::vector<int32_t> tokens;
  std::vector<const float*> embd;
  std::vector<int32_t> attn_end;
  std::vector<std::vector<float>> scaled;
  int32_t n_tail = 0;
  for (const PromptPiece& p : k.pieces) {
    for (int32_t t : p.tokens) {
      tokens.push_back(t);
      embd.push_back(nullptr);
      attn_end.push_back(static_cast<int32_t>(tokens.size()));
    }
    n_tail = static_cast<int32_t>(p.tokens.size());
    if (p.image < 0) continue;
    const std::vector<float>* r = &rows[p.image];
    if (v == Variant::kScaledRows) {
      scaled.push_back(*r);
      for (float& x : scaled.back()) x *= std::sqrt(static_cast<float>(mc.n_embd));
      r = &scaled.back();
    }
    const int32_t first = static_cast<int32_t>(tokens.size()), n = static_cast<int32_t>(r->size() / mc.n_embd);
    for (int32_t j = 0; j < n; ++j) {
      tokens.push_back(0);
      embd.push_back(r->data() + static_cast<size_t>(j) * mc.n_embd);
      attn_end.push_back(v == Variant::kCausalImages ? first + j + 1 : first + n);
    }
  }
  EXPECT_EQ(static_cast<int32_t>(tokens.size()), k.n_prompt);
  const int32_t n_prompt = static_cast<int32_t>(tokens.size());
  std::vector<int32_t> table;
  for (int32_t i = 0; i * kBlock < n_prompt + static_cast<int32_t>(k.greedy.size()); ++i) table.push_back(i);
  const int64_t V = mc.n_vocab;
  std::vector<float> out(static_cast<size_t>(n_tail + k.greedy.size() - 1) * V);
  std::vector<int32_t> rows_wanted;
  for (int32_t i = n_prompt - n_tail; i < n_prompt; ++i) rows_wanted.push_back(i);
  const BatchSeq seq{0, n_prompt, 0, table};
  Batch batch{tokens, std::span<const BatchSeq>(&seq, 1), rows_wanted, embd, attn_end};
  Status st = b.Forward(batch, out.data());
  EXPECT_TRUE(st.ok()) << st.message();
  for (size_t g = 0; g + 1 < k.greedy.size(); ++g) {
    const int32_t tok = k.greedy[g], row = 0;
    const BatchSeq one{0, 1, n_prompt + static_cast<int32_t>(g), table};
    Batch step{std::span<const int32_t>(&tok, 1), std::span<const BatchSeq>(&one, 1), std::span<const int32_t>(&row, 1)};
    st = b.Forward(step, out.data() + (n_tail + g) * V);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return out;
}

TEST_F(ImagePrompt, BackendLogitsMatchLlamaCpp) {
  auto m = Model::Load(text_path_->c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  const ModelConfig& mc = (*m)->config;
  ASSERT_EQ(mc.n_vocab, n_vocab_);
  ASSERT_NE(mc.embd_scale, 1.0f);  // Gemma: token rows are scaled
  auto vm = VisionModel::Open(*proj_path_);
  ASSERT_TRUE(vm.ok());
  auto enc = cpu::CreateCpuVisionEncoder((*vm)->config, (*vm)->weights, 2);
  ASSERT_TRUE(enc.ok());
  ASSERT_EQ((*enc)->n_tokens(), ref_->Find("n_image_tokens")->as_int());
  std::vector<std::vector<float>> rows;
  for (const ImageInput& in : *images_) {
    rows.emplace_back(static_cast<size_t>((*enc)->n_tokens()) * mc.n_embd);
    ASSERT_TRUE((*enc)->Encode(in.pixels, rows.back().data()).ok());
  }
  for (size_t c = 0; c < cases_->size(); ++c) {
    const RefCase& k = (*cases_)[c];
    SCOPED_TRACE("case " + std::to_string(c));
    std::vector<float> want = k.tail_logits;
    want.insert(want.end(), k.greedy_logits.begin(), k.greedy_logits.end());
    double worst[3];
    for (Variant v : {Variant::kAsLlamaCpp, Variant::kScaledRows, Variant::kCausalImages}) {
      auto b = CreateCpuBackend(mc, (*m)->weights, KvCacheSpec{kBlock, 16, 256}, 2);
      ASSERT_TRUE(b.ok());
      const std::vector<float> got = BackendLogits(**b, mc, k, rows, v);
      ASSERT_EQ(got.size(), want.size());
      worst[static_cast<int>(v)] = CompareRel(got.data(), want.data(), got.size(), kRelTol).worst;
    }
    std::printf("case %zu: worst relative logit difference %.3g (rows scaled by sqrt(n_embd): %.3g; "
                "image span causal: %.3g)\n", c, worst[0], worst[1], worst[2]);
    EXPECT_LE(worst[0], kRelTol);
    // Each choice the other way is far outside the tolerance, so the test
    // above decides both: no input scale on image rows, a two-way span.
    EXPECT_GT(worst[1], 20 * kRelTol);
    EXPECT_GT(worst[2], 20 * kRelTol);
  }
}

// Through the engine: llama.cpp's greedy tokens, with the prompt in one
// step and in chunks of 17 and 20 tokens (boundaries that would fall inside
// an image's 16 positions move to its start).
TEST_F(ImagePrompt, EngineGreedyMatchesLlamaCpp) {
  for (int32_t budget : {512, 20, 17}) {
    auto e = MakeEngine(budget);
    ASSERT_NE(e, nullptr);
    for (size_t c = 0; c < cases_->size(); ++c) {
      const RefCase& k = (*cases_)[c];
      SCOPED_TRACE("budget " + std::to_string(budget) + " case " + std::to_string(c));
      const Result r = Run(*e, Greedy(k, static_cast<int32_t>(k.greedy.size())));
      ASSERT_EQ(r.status, LLM_OK) << r.message;
      EXPECT_EQ(r.tokens, k.greedy);
      EXPECT_EQ(r.metrics.prompt_tokens, k.n_prompt);  // the image positions count
    }
  }
}

// Through the C API: a context with the projector (mmproj_path), the prompt
// as text and raw-RGB parts as llama.cpp's text and bitmaps were, so the
// layout (capi_parts: markers, special tokens, BOS), the decoding-free path
// to the engine and the engine itself give llama.cpp's greedy tokens.
TEST_F(ImagePrompt, CapiPartsGreedyMatchesLlamaCpp) {
  const llm_ctx_params p = ReferenceCtxParams(text_path_->c_str(), proj_path_->c_str());
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  for (size_t c = 0; c < cases_->size(); ++c) {
    const RefCase& k = (*cases_)[c];
    SCOPED_TRACE("case " + std::to_string(c) + ": " + k.text);
    std::vector<const RgbImage*> shown;
    for (const PromptPiece& piece : k.pieces)
      if (piece.image >= 0) shown.push_back(&(*rgbs_)[static_cast<size_t>(piece.image)]);
    ImagePromptParts prompt;
    ASSERT_NO_FATAL_FAILURE(prompt.Build(k.text, shown));
    const ApiGreedyRun run = ApiGreedyRequest(ctx, prompt.Request(), static_cast<int>(k.greedy.size()));
    ASSERT_EQ(run.status, LLM_OK) << llm_last_error();
    EXPECT_EQ(std::vector<int32_t>(run.tokens.begin(), run.tokens.end()), k.greedy);
    EXPECT_EQ(run.metrics.prompt_tokens, k.n_prompt);  // the image positions count
  }
  llm_ctx_destroy(ctx);
}

TEST_F(ImagePrompt, SameImageIsEncodedOnceAndItsBlocksReused) {
  auto e = MakeEngine(512);
  ASSERT_NE(e, nullptr);
  const RefCase& k = (*cases_)[0];
  const Result first = Run(*e, Greedy(k, 2));
  ASSERT_EQ(first.status, LLM_OK) << first.message;
  EXPECT_EQ(e->image_stats().encoded, 1u);
  EXPECT_EQ(e->image_stats().cache_hits, 0u);
  const Result again = Run(*e, Greedy(k, static_cast<int32_t>(k.greedy.size())));
  ASSERT_EQ(again.status, LLM_OK) << again.message;
  EXPECT_EQ(e->image_stats().encoded, 1u) << "the same image was encoded twice";
  EXPECT_EQ(e->image_stats().cache_hits, 1u);
  EXPECT_EQ(again.metrics.cached_prompt_tokens, (k.n_prompt - 1) / kBlock * kBlock);  // image blocks included
  EXPECT_EQ(again.tokens, k.greedy);
}

// The same text with another picture in the same place: encoded anew, only
// the blocks before the image come from the cache, and the continuation is
// that picture's (llama.cpp's for it), not the first one's.
TEST_F(ImagePrompt, AnotherImageNeverMatchesTheCachedOne) {
  auto e = MakeEngine(512);
  ASSERT_NE(e, nullptr);
  const RefCase& a = (*cases_)[0];
  const RefCase& b = (*cases_)[1];
  ASSERT_EQ(a.pieces[0].tokens, b.pieces[0].tokens);
  ASSERT_NE(a.pieces[1].image, b.pieces[1].image);
  ASSERT_NE(a.greedy, b.greedy) << "the reference's two pictures should continue differently";
  ASSERT_EQ(Run(*e, Greedy(a, 2)).status, LLM_OK);
  const Result r = Run(*e, Greedy(b, static_cast<int32_t>(b.greedy.size())));
  ASSERT_EQ(r.status, LLM_OK) << r.message;
  EXPECT_EQ(e->image_stats().encoded, 2u);
  const int32_t image_at = static_cast<int32_t>(b.pieces[0].tokens.size());
  EXPECT_EQ(r.metrics.cached_prompt_tokens, image_at / kBlock * kBlock);
  EXPECT_EQ(r.tokens, b.greedy);
}

// Parallel samples fork from the sequence that ran the prompt, images and
// all; at temperature 0 each continues as llama.cpp did.
TEST_F(ImagePrompt, ParallelSamplesContinueFromTheImagePrompt) {
  auto e = MakeEngine(17);
  ASSERT_NE(e, nullptr);
  const RefCase& k = (*cases_)[2];
  RequestSpec s = Greedy(k, static_cast<int32_t>(k.greedy.size()));
  s.n = 2;
  auto id = e->Submit(std::move(s));
  ASSERT_TRUE(id.ok()) << id.status().message();
  std::vector<int32_t> tokens[2];
  int finals = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (finals < 2 && std::chrono::steady_clock::now() < deadline) {
    llm_event ev[16];
    uint32_t n = 0;
    ASSERT_TRUE(e->Poll(ev, 16, sizeof(llm_event), &n, 1000).ok());
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_TRUE(ev[i].seq_index == 0 || ev[i].seq_index == 1);
      if (ev[i].type == LLM_EVENT_TOKEN) tokens[ev[i].seq_index].push_back(ev[i].token);
      if (ev[i].type == LLM_EVENT_FINAL) {
        EXPECT_EQ(ev[i].status, LLM_OK);
        ++finals;
      }
    }
  }
  EXPECT_EQ(finals, 2);
  EXPECT_EQ(tokens[0], k.greedy);
  EXPECT_EQ(tokens[1], k.greedy);
  EXPECT_EQ(e->image_stats().encoded, 2u);  // its two pictures, once each
}

// Two image prompts in a pool too small for both: one is preempted and
// recomputes its prompt, images included, and still continues as
// llama.cpp did.
TEST_F(ImagePrompt, PreemptedImagePromptRecomputes) {
  auto e = MakeEngine(32, true, /*n_blocks=*/12);  // 9 blocks each at the end
  ASSERT_NE(e, nullptr);
  const RefCase* k[2] = {&(*cases_)[0], &(*cases_)[1]};
  uint64_t ids[2];
  for (int i = 0; i < 2; ++i) {
    auto id = e->Submit(Greedy(*k[i], static_cast<int32_t>(k[i]->greedy.size())));
    ASSERT_TRUE(id.ok()) << id.status().message();
    ids[i] = *id;
  }
  std::vector<int32_t> tokens[2];
  int finals = 0, preemptions = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (finals < 2 && std::chrono::steady_clock::now() < deadline) {
    llm_event ev[16];
    uint32_t n = 0;
    ASSERT_TRUE(e->Poll(ev, 16, sizeof(llm_event), &n, 1000).ok());
    for (uint32_t i = 0; i < n; ++i) {
      const int which = ev[i].request_id == ids[0] ? 0 : 1;
      if (ev[i].type == LLM_EVENT_TOKEN) tokens[which].push_back(ev[i].token);
      if (ev[i].type == LLM_EVENT_FINAL) {
        EXPECT_EQ(ev[i].status, LLM_OK) << (ev[i].message != nullptr ? ev[i].message : "");
        preemptions += ev[i].metrics.preemptions;
        ++finals;
      }
    }
  }
  EXPECT_EQ(finals, 2);
  EXPECT_GT(preemptions, 0) << "the pool should have been too small for both";
  EXPECT_EQ(tokens[0], k[0]->greedy);
  EXPECT_EQ(tokens[1], k[1]->greedy);
}

TEST_F(ImagePrompt, BadRequestsAreRefused) {
  const RefCase& k = (*cases_)[0];
  {
    auto plain = MakeEngine(512, /*attach=*/false);
    ASSERT_NE(plain, nullptr);
    const Result r = Run(*plain, Greedy(k, 2));
    EXPECT_EQ(r.status, LLM_ERR_INVALID_ARGUMENT);
    EXPECT_NE(r.message.find("projector"), std::string::npos) << r.message;
  }
  auto e = MakeEngine(512);
  ASSERT_NE(e, nullptr);
  auto expect = [&](RequestSpec s, llm_status want, const char* words) {
    const Result r = Run(*e, std::move(s));
    EXPECT_EQ(r.status, want) << r.message;
    EXPECT_NE(r.message.find(words), std::string::npos) << r.message;
  };
  RequestSpec s = Greedy(k, 2);
  s.images[0].pixels.pop_back();
  expect(s, LLM_ERR_INVALID_ARGUMENT, "values");
  s = Greedy(k, 2);
  s.images[0].pixels[5] = std::nanf("");
  expect(s, LLM_ERR_INVALID_ARGUMENT, "finite");
  s = Greedy(k, 2);
  s.pieces[1].image = 7;
  expect(s, LLM_ERR_INVALID_ARGUMENT, "names image");
  s = Greedy(k, 2);
  s.pieces[0].tokens.push_back(n_vocab_);
  expect(s, LLM_ERR_INVALID_ARGUMENT, "vocabulary");
  s = Greedy(k, 2);
  s.prompt = {1, 2, 3};
  expect(s, LLM_ERR_INVALID_ARGUMENT, "not both");
  s = Greedy(k, 2);
  s.pieces.clear();
  expect(s, LLM_ERR_INVALID_ARGUMENT, "no prompt pieces");
  s = Greedy(k, 2);
  s.prompt_logprobs = true;
  expect(s, LLM_ERR_UNSUPPORTED, "logprobs");
  s = Greedy(k, 250);
  expect(s, LLM_ERR_CONTEXT_OVERFLOW, "context");
  {
    auto narrow = MakeEngine(8);  // a step of 8 tokens cannot hold an image's 16
    ASSERT_NE(narrow, nullptr);
    const Result r = Run(*narrow, Greedy(k, 2));
    EXPECT_EQ(r.status, LLM_ERR_INVALID_ARGUMENT);
    EXPECT_NE(r.message.find("max_batch_tokens"), std::string::npos) << r.message;
  }
  // a projector of another width
  auto vm = VisionModel::Open(*proj_path_);
  ASSERT_TRUE(vm.ok());
  (*vm)->config.n_embd_out += 1;
  auto other = MakeEngine(512, /*attach=*/false);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->AttachVision(std::move(*vm), 1).code(), LLM_ERR_MODEL_FORMAT);
  // after all of them, the context still answers
  const Result ok = Run(*e, Greedy(k, static_cast<int32_t>(k.greedy.size())));
  EXPECT_EQ(ok.status, LLM_OK) << ok.message;
  EXPECT_EQ(ok.tokens, k.greedy);
}

}  // namespace
}  // namespace llm::test
