// Images in the prompt through the C API (issue 36), up to the engine's
// image path: the projector file of llm_ctx_params.mmproj_path and its
// checks against the text model; llm_request.parts (every refusal llm.h
// names, the decoding and preprocessing of each picture, the layout of
// pictures at the template's markers or where their parts stand); and
// llm_chat_apply_template_v2 against jinja2's rendering of Gemma 3's
// template (tests/data/chat/gemma3_images.json, tools/chat_image_reference.py).
// The models are synthesized: tiny-gemma3 with its tiny projector
// (llm-synth --mmproj), tiny-llama3 for a family mismatch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "capi/capi_util.h"
#include "llm.h"
#include "support/test_paths.h"
#include "synth_mmproj.h"
#include "synth_model.h"
#include "util/json.h"
#include "vision/image_decode.h"

namespace llm::test {
namespace {

std::string Temp(const std::string& name) {
  return ::testing::TempDir() + "/llmrt_capi_images_" + std::to_string(::getpid()) + "_" + name;
}

class CapiImages : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    synth::SynthOptions o;
    o.type = TensorType::F32;
    o.seed = 7;
    ASSERT_TRUE(synth::WriteSynthModel(*synth::FindSynthShape("tiny-gemma3"), o, Temp("gemma3.gguf")).ok());
    ASSERT_TRUE(synth::WriteSynthModel(*synth::FindSynthShape("tiny-llama3"), o, Temp("llama3.gguf")).ok());
    const synth::SynthVisionShape* vs = synth::FindSynthVisionShape("tiny-gemma3");
    ASSERT_NE(vs, nullptr);
    ASSERT_TRUE(synth::WriteSynthMmproj(*vs, o, Temp("mmproj.gguf")).ok());
    synth::SynthVisionShape narrow = *vs;
    narrow.n_embd_out = 32;  // not tiny-gemma3's 64
    ASSERT_TRUE(synth::WriteSynthMmproj(narrow, o, Temp("mmproj32.gguf")).ok());
    ASSERT_EQ(Create(Temp("gemma3.gguf"), Temp("mmproj.gguf").c_str(), &vision_), LLM_OK) << llm_last_error();
    ASSERT_EQ(Create(Temp("gemma3.gguf"), nullptr, &plain_), LLM_OK) << llm_last_error();
  }
  static void TearDownTestSuite() {
    llm_ctx_destroy(vision_);
    llm_ctx_destroy(plain_);
    vision_ = plain_ = nullptr;
    for (const char* f : {"gemma3.gguf", "llama3.gguf", "mmproj.gguf", "mmproj32.gguf"}) std::remove(Temp(f).c_str());
  }
  static llm_status Create(const std::string& model, const char* mmproj, llm_ctx** out) {
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    p.model_path = model.c_str();
    p.mmproj_path = mmproj;
    p.n_threads = 1;
    p.n_ctx = 512;
    return llm_ctx_create(&p, out);
  }
  static llm_content_part Text(const char* t) {
    llm_content_part p;
    llm_content_part_init(&p);
    p.text = t;
    return p;
  }
  static llm_content_part Image(const std::string& bytes) {
    llm_content_part p;
    llm_content_part_init(&p);
    p.kind = LLM_CONTENT_IMAGE;
    p.data = bytes.data();
    p.n_data = bytes.size();
    return p;
  }
  static llm_content_part Rgb(const std::vector<uint8_t>& px, int32_t w, int32_t h) {
    llm_content_part p;
    llm_content_part_init(&p);
    p.kind = LLM_CONTENT_IMAGE_RGB;
    p.data = px.data();
    p.n_data = px.size();
    p.width = w;
    p.height = h;
    return p;
  }
  // llm_submit with these parts: the status, llm_last_error() in *msg.
  static llm_status Submit(llm_ctx* ctx, const std::vector<llm_content_part>& parts, std::string* msg = nullptr,
                           int32_t n_parts = -1) {
    llm_request r;
    llm_request_init(&r);
    r.parts = parts.empty() ? nullptr : parts.data();
    r.n_parts = n_parts >= 0 ? n_parts : static_cast<int32_t>(parts.size());
    r.max_tokens = 2;
    llm_request_id id = 0;
    const llm_status s = llm_submit(ctx, &r, &id);
    if (msg != nullptr) *msg = llm_last_error();
    if (s == LLM_OK) {  // drain it
      llm_event ev[8];
      ev[0].struct_size = sizeof(llm_event);
      for (bool done = false; !done;) {
        uint32_t n = 0;
        EXPECT_EQ(llm_poll(ctx, ev, 8, &n, 5000), LLM_OK);
        for (uint32_t i = 0; i < n; ++i) done = done || ev[i].type == LLM_EVENT_FINAL;
      }
    }
    return s;
  }
  static std::vector<int32_t> Tokens(const char* text, uint32_t flags) {
    std::vector<int32_t> ids(256);
    int32_t n = 0;
    EXPECT_EQ(llm_tokenize(vision_, text, std::strlen(text), flags, ids.data(), 256, &n), LLM_OK);
    ids.resize(n);
    return ids;
  }

  static llm_ctx* vision_;  // tiny-gemma3 with its projector
  static llm_ctx* plain_;   // tiny-gemma3 without one
};
llm_ctx* CapiImages::vision_ = nullptr;
llm_ctx* CapiImages::plain_ = nullptr;

TEST_F(CapiImages, ProjectorChecksAtCreate) {
  llm_ctx* ctx = nullptr;
  EXPECT_EQ(Create(Temp("gemma3.gguf"), "/nonexistent/mmproj.gguf", &ctx), LLM_ERR_IO);
  EXPECT_NE(std::string(llm_last_error()).find("mmproj_path"), std::string::npos) << llm_last_error();
  EXPECT_EQ(ctx, nullptr);
  // the projector's output width is not the text model's n_embd
  EXPECT_EQ(Create(Temp("gemma3.gguf"), Temp("mmproj32.gguf").c_str(), &ctx), LLM_ERR_MODEL_FORMAT);
  EXPECT_NE(std::string(llm_last_error()).find("n_embd 64"), std::string::npos) << llm_last_error();
  // a Gemma 3 projector for a llama model of the same width
  EXPECT_EQ(Create(Temp("llama3.gguf"), Temp("mmproj.gguf").c_str(), &ctx), LLM_ERR_MODEL_FORMAT);
  EXPECT_NE(std::string(llm_last_error()).find("\"gemma3\" models"), std::string::npos) << llm_last_error();
  // a text model given as the projector
  EXPECT_NE(Create(Temp("gemma3.gguf"), Temp("llama3.gguf").c_str(), &ctx), LLM_OK);
  EXPECT_EQ(ctx, nullptr);
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = nullptr;
  p.reserved6 = 1;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_INVALID_ARGUMENT);
}

// Images run on the CPU backend only: an explicit CUDA context with a
// projector is refused (before the model loads); one whose backend was left
// to the library (AUTO, here steered to CUDA by the LLM_BACKEND switch, as a
// machine with a GPU would) runs on the CPU and takes pictures.
TEST_F(CapiImages, CudaFallsBackToTheCpuForImages) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  const std::string model = Temp("gemma3.gguf"), proj = Temp("mmproj.gguf");
  p.model_path = model.c_str();
  p.mmproj_path = proj.c_str();
  p.n_threads = 1;
  p.n_ctx = 512;
  p.backend = LLM_BACKEND_CUDA;
  llm_ctx* ctx = nullptr;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(ctx, nullptr);
  const std::string refusal = llm_last_error();
  {  // does this build run a CUDA context at all (a device, or the emulator)?
    llm_ctx_params q = p;
    q.mmproj_path = nullptr;
    llm_ctx* cuda = nullptr;
    if (llm_ctx_create(&q, &cuda) != LLM_OK) GTEST_SKIP() << "no CUDA backend here: " << llm_last_error();
    llm_ctx_destroy(cuda);
  }
  EXPECT_NE(refusal.find("CPU backend only"), std::string::npos) << refusal;
  ASSERT_EQ(setenv("LLM_BACKEND", "cuda", 1), 0);
  p.backend = LLM_BACKEND_AUTO;
  const llm_status st = llm_ctx_create(&p, &ctx);
  unsetenv("LLM_BACKEND");
  ASSERT_EQ(st, LLM_OK) << llm_last_error();
  llm_stats s{};
  s.struct_size = sizeof(s);
  ASSERT_EQ(llm_get_stats(ctx, &s), LLM_OK);
  EXPECT_EQ(s.backend, LLM_BACKEND_CPU);
  std::string msg;
  const std::vector<uint8_t> px(6 * 4 * 3, 90);
  EXPECT_EQ(Submit(ctx, {Text("look: "), Rgb(px, 6, 4)}, &msg), LLM_OK) << msg;
  llm_ctx_destroy(ctx);
}

TEST_F(CapiImages, BadPartsAreRefused) {
  std::string msg;
  const std::vector<uint8_t> px(4 * 3 * 3, 128);
  const std::string png = ReadFile(DataDir() + "/images/rgb.png");
  // no projector
  EXPECT_EQ(Submit(plain_, {Text("hi "), Rgb(px, 4, 3)}, &msg), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("mmproj_path"), std::string::npos) << msg;
  // parts with prompt
  {
    std::vector<llm_content_part> parts{Text("hi")};
    llm_request r;
    llm_request_init(&r);
    r.parts = parts.data();
    r.n_parts = 1;
    r.prompt = "hi";
    llm_request_id id;
    EXPECT_EQ(llm_submit(vision_, &r, &id), LLM_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(llm_last_error()).find("exclusive"), std::string::npos);
    r.prompt = nullptr;
    r.reserved6 = 3;
    EXPECT_EQ(llm_submit(vision_, &r, &id), LLM_ERR_INVALID_ARGUMENT);
  }
  EXPECT_EQ(Submit(vision_, {}, &msg, 2), LLM_ERR_NULL_ARGUMENT);   // NULL parts, n_parts 2
  EXPECT_EQ(Submit(vision_, {Text("x")}, &msg, 0), LLM_ERR_INVALID_ARGUMENT);  // parts, n_parts 0
  auto bad_size = Text("x");
  bad_size.struct_size = 8;
  EXPECT_EQ(Submit(vision_, {bad_size}, &msg), LLM_ERR_STRUCT_SIZE);
  auto bad_kind = Text("x");
  bad_kind.kind = 7;
  EXPECT_EQ(Submit(vision_, {bad_kind}, &msg), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("parts[0].kind 7"), std::string::npos) << msg;
  EXPECT_EQ(Submit(vision_, {Text(nullptr)}, &msg), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(Submit(vision_, {Text("ok"), Text("\xff\xfe")}, &msg), LLM_ERR_INVALID_UTF8);
  EXPECT_NE(msg.find("parts[1]"), std::string::npos) << msg;
  // image bytes
  auto null_data = Image(png);
  null_data.data = nullptr;
  EXPECT_EQ(Submit(vision_, {null_data}, &msg), LLM_ERR_NULL_ARGUMENT);
  auto no_bytes = Image(png);
  no_bytes.n_data = 0;
  EXPECT_EQ(Submit(vision_, {no_bytes}, &msg), LLM_ERR_INVALID_ARGUMENT);
  auto sized = Image(png);
  sized.width = 17;
  EXPECT_EQ(Submit(vision_, {sized}, &msg), LLM_ERR_INVALID_ARGUMENT);
  // raw RGB: the byte count, the sides
  EXPECT_EQ(Submit(vision_, {Rgb(px, 4, 4)}, &msg), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("width * height * 3 is 48"), std::string::npos) << msg;
  EXPECT_EQ(Submit(vision_, {Rgb(px, 0, 12)}, &msg), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Submit(vision_, {Rgb(px, -4, -3)}, &msg), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Submit(vision_, {Rgb(px, 100000, 1)}, &msg), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("at most 16384"), std::string::npos) << msg;
  // text that cannot fit the context whatever it tokenizes to
  const std::string huge(8u << 20, 'a');
  EXPECT_EQ(Submit(vision_, {Text(huge.c_str()), Rgb(px, 4, 3)}, &msg), LLM_ERR_CONTEXT_OVERFLOW);
  // too many pictures
  std::vector<llm_content_part> many(65, Rgb(px, 4, 3));
  EXPECT_EQ(Submit(vision_, many, &msg), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("at most 64"), std::string::npos) << msg;
  if (!HaveImageCodecs()) return;
  // encoded pictures: corrupt, truncated, oversized headers, other formats
  std::string corrupt = png;
  corrupt[28] ^= 0x40;  // IHDR's interlace byte: its CRC no longer matches
  EXPECT_EQ(Submit(vision_, {Image(corrupt)}, &msg), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("corrupt PNG"), std::string::npos) << msg;
  EXPECT_EQ(Submit(vision_, {Image(png.substr(0, png.size() / 2))}, &msg), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  for (const char* f : {"huge.png", "bomb.png", "huge.jpg"}) {
    EXPECT_EQ(Submit(vision_, {Image(ReadFile(DataDir() + "/images/" + f))}, &msg), LLM_ERR_INVALID_ARGUMENT) << f;
    EXPECT_NE(msg.find("header declares"), std::string::npos) << msg;
  }
  // a WebP container cut off after its chunk header: corrupt where libwebp
  // is built in, unsupported where it is not; GIF is never decoded
  EXPECT_EQ(Submit(vision_, {Image(std::string("RIFF\x10\0\0\0WEBPVP8 ", 16))}, &msg),
            HaveWebpCodec() ? LLM_ERR_INVALID_ARGUMENT : LLM_ERR_UNSUPPORTED);
  EXPECT_NE(msg.find("WebP"), std::string::npos) << msg;
  EXPECT_EQ(Submit(vision_, {Image(std::string("GIF89a\x01\0\x01\0", 10))}, &msg), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(Submit(vision_, {Image("not a picture")}, &msg), LLM_ERR_INVALID_ARGUMENT);
  // the template's markers and the pictures must agree in number
  EXPECT_EQ(Submit(vision_, {Text("a <start_of_image> b <start_of_image>"), Image(png)}, &msg),
            LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("2 image markers"), std::string::npos) << msg;
}

// Valid pictures reach the engine (test_image_prompt compares what it makes
// of them with llama.cpp).
TEST_F(CapiImages, ValidImagesReachTheEngine) {
  std::string msg;
  const std::vector<uint8_t> px(5 * 7 * 3, 200);
  EXPECT_EQ(Submit(vision_, {Text("look: "), Rgb(px, 5, 7)}, &msg), LLM_OK) << msg;
  if (HaveImageCodecs()) {
    EXPECT_EQ(Submit(vision_, {Image(ReadFile(DataDir() + "/images/rgb.jpg"))}, &msg), LLM_OK) << msg;
  }
  // text-only parts are a prompt like any other
  EXPECT_EQ(Submit(vision_, {Text("hello")}, &msg), LLM_OK) << msg;
  EXPECT_EQ(Submit(plain_, {Text("hello"), Text(" again")}, &msg), LLM_OK) << msg;
}

// llm_stats' image counters (appended in 0.7): the same picture twice is one
// encoding and one cache hit, each request's image positions are counted
// (tiny-gemma3's projector: 16 soft tokens), encoding time only grows when
// the encoder runs; a caller built against the 0.6 struct gets its fields
// and nothing past them.
TEST_F(CapiImages, StatsCountEncodingsAndCacheHits) {
  auto stats = [] {
    llm_stats s;
    std::memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    EXPECT_EQ(llm_get_stats(vision_, &s), LLM_OK) << llm_last_error();
    return s;
  };
  std::vector<uint8_t> px(9 * 4 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 37 + 11);  // seen by no other test
  std::string msg;
  const llm_stats s0 = stats();
  ASSERT_EQ(Submit(vision_, {Text("first: "), Rgb(px, 9, 4)}, &msg), LLM_OK) << msg;
  const llm_stats s1 = stats();
  EXPECT_EQ(s1.images_encoded - s0.images_encoded, 1u);
  EXPECT_EQ(s1.image_cache_hits - s0.image_cache_hits, 0u);
  EXPECT_EQ(s1.image_tokens - s0.image_tokens, 16u);
  EXPECT_GT(s1.image_encode_seconds, s0.image_encode_seconds);
  ASSERT_EQ(Submit(vision_, {Text("again: "), Rgb(px, 9, 4)}, &msg), LLM_OK) << msg;
  const llm_stats s2 = stats();
  EXPECT_EQ(s2.images_encoded - s1.images_encoded, 0u) << "the same picture was encoded twice";
  EXPECT_EQ(s2.image_cache_hits - s1.image_cache_hits, 1u);
  EXPECT_EQ(s2.image_tokens - s1.image_tokens, 16u);
  EXPECT_EQ(s2.image_encode_seconds, s1.image_encode_seconds);
  // one picture twice in one request: one more encoding, one hit
  px[0] ^= 1;
  ASSERT_EQ(Submit(vision_, {Rgb(px, 9, 4), Text(" and "), Rgb(px, 9, 4)}, &msg), LLM_OK) << msg;
  const llm_stats s3 = stats();
  EXPECT_EQ(s3.images_encoded - s2.images_encoded, 1u);
  EXPECT_EQ(s3.image_cache_hits - s2.image_cache_hits, 1u);
  EXPECT_EQ(s3.image_tokens - s2.image_tokens, 32u);
  // the 0.6 layout ends at moe_predicted_right: nothing past it is written
  std::vector<uint8_t> old(sizeof(llm_stats), 0xAB);
  llm_stats* o = reinterpret_cast<llm_stats*>(old.data());
  o->struct_size = offsetof(llm_stats, images_encoded);
  ASSERT_EQ(llm_get_stats(vision_, o), LLM_OK) << llm_last_error();
  for (size_t i = offsetof(llm_stats, images_encoded); i < old.size(); ++i) ASSERT_EQ(old[i], 0xAB) << i;
}

// The pieces handed to the engine: pictures where their parts stand, or at
// the template's markers; each wrapped in <start_of_image> ...
// <end_of_image>; BOS once; the pixels preprocessed to the tower's square.
TEST_F(CapiImages, PromptLayout) {
  const std::vector<uint8_t> a(4 * 3 * 3, 10), b(4 * 3 * 3, 240);
  auto layout = [&](std::vector<llm_content_part> parts, uint32_t flags) {
    llm_request r;
    llm_request_init(&r);
    r.parts = parts.data();
    r.n_parts = static_cast<int32_t>(parts.size());
    r.tokenize_flags = flags;
    std::vector<PromptPiece> pieces;
    std::vector<ImageInput> images;
    EXPECT_EQ(capi::ToPromptParts(r, *vision_, &pieces, &images), LLM_OK) << llm_last_error();
    return std::make_pair(pieces, images);
  };
  const uint32_t add = LLM_TOKENIZE_ADD_SPECIAL;
  // One tokenizer call per stretch of text and per marker, as libmtmd
  // (test_image_prompt compares whole prompts with llama.cpp's): this
  // vocabulary has no <start_of_image> token, so each marker is spelled out
  // with its own space prefix.
  const uint32_t ps = LLM_TOKENIZE_PARSE_SPECIAL;
  auto cat = [](std::initializer_list<std::vector<int32_t>> parts) {
    std::vector<int32_t> v;
    for (const auto& p : parts) v.insert(v.end(), p.begin(), p.end());
    return v;
  };
  auto [pieces, images] = layout({Text("one"), Rgb(a, 4, 3), Text("two"), Rgb(b, 4, 3)}, add);
  ASSERT_EQ(pieces.size(), 5u);
  EXPECT_EQ(pieces[0].tokens, cat({Tokens("one", add | ps), Tokens("<start_of_image>", ps)}));
  EXPECT_EQ(pieces[1].image, 0);
  EXPECT_EQ(pieces[2].tokens, cat({Tokens("<end_of_image>", ps), Tokens("two", ps), Tokens("<start_of_image>", ps)}));
  EXPECT_EQ(pieces[3].image, 1);
  EXPECT_EQ(pieces[4].tokens, Tokens("<end_of_image>", ps));
  ASSERT_EQ(images.size(), 2u);
  const int32_t side = synth::FindSynthVisionShape("tiny-gemma3")->image_size;
  EXPECT_EQ(images[0].width, side);
  EXPECT_EQ(images[0].pixels.size(), static_cast<size_t>(3 * side * side));
  EXPECT_NE(images[0].hash, images[1].hash);
  // the same picture twice: the same hash (one encoding in the engine)
  auto [p2, i2] = layout({Rgb(a, 4, 3), Rgb(a, 4, 3)}, 0);
  ASSERT_EQ(i2.size(), 2u);
  EXPECT_EQ(i2[0].hash, i2[1].hash);
  EXPECT_EQ(i2[0].hash, images[0].hash);
  // the chat path: markers in the rendered text take the pictures in order
  auto [p3, i3] = layout({Text("<s>x<start_of_image>y<start_of_image>z"), Rgb(a, 4, 3), Rgb(b, 4, 3)},
                         LLM_TOKENIZE_PARSE_SPECIAL);
  ASSERT_EQ(p3.size(), 5u);
  EXPECT_EQ(p3[0].tokens, cat({Tokens("<s>x", ps), Tokens("<start_of_image>", ps)}));
  EXPECT_EQ(p3[1].image, 0);
  EXPECT_EQ(p3[2].tokens, cat({Tokens("<end_of_image>", ps), Tokens("y", ps), Tokens("<start_of_image>", ps)}));
  EXPECT_EQ(p3[3].image, 1);
  EXPECT_EQ(p3[4].tokens, cat({Tokens("<end_of_image>", ps), Tokens("z", ps)}));
}

TEST_F(CapiImages, ChatTemplateV2MatchesJinja2) {
  auto ref = ParseJson(ReadFile(DataDir() + "/chat/gemma3_images.json"));
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  const std::vector<uint8_t> px(3, 0);
  for (const Json& c : ref->Find("cases")->array()) {
    SCOPED_TRACE(c.Find("name")->as_string());
    std::vector<std::vector<llm_content_part>> parts;
    std::vector<llm_chat_message_v2> msgs;
    for (const Json& m : c.Find("messages")->array()) {
      parts.emplace_back();
      for (const Json& item : m.Find("content")->array())
        parts.back().push_back(item.Find("type")->as_string() == "image" ? Rgb(px, 1, 1)
                                                                          : Text(item.Find("text")->as_string().c_str()));
    }
    size_t k = 0;
    for (const Json& m : c.Find("messages")->array()) {
      llm_chat_message_v2 msg{sizeof(llm_chat_message_v2), static_cast<int32_t>(parts[k].size()),
                              m.Find("role")->as_string().c_str(), parts[k].data()};
      msgs.push_back(msg);
      ++k;
    }
    std::string out(4096, '\0');
    size_t n = 0;
    ASSERT_EQ(llm_chat_apply_template_v2(vision_, nullptr, msgs.data(), msgs.size(), 1, out.data(), out.size(), &n),
              LLM_OK)
        << llm_last_error();
    out.resize(n);
    EXPECT_EQ(out, c.Find("rendered")->as_string());
  }
  // refusals
  std::vector<llm_content_part> one{Text("hi")};
  llm_chat_message_v2 m{sizeof(llm_chat_message_v2), 1, "user", one.data()};
  char buf[256];
  size_t n = 0;
  m.struct_size = 16;
  EXPECT_EQ(llm_chat_apply_template_v2(vision_, nullptr, &m, 1, 1, buf, sizeof(buf), &n), LLM_ERR_STRUCT_SIZE);
  m.struct_size = sizeof(m);
  m.role = nullptr;
  EXPECT_EQ(llm_chat_apply_template_v2(vision_, nullptr, &m, 1, 1, buf, sizeof(buf), &n), LLM_ERR_NULL_ARGUMENT);
  m.role = "user";
  m.n_parts = -1;
  EXPECT_EQ(llm_chat_apply_template_v2(vision_, nullptr, &m, 1, 1, buf, sizeof(buf), &n), LLM_ERR_INVALID_ARGUMENT);
  m.n_parts = 1;
  one[0].kind = 9;
  EXPECT_EQ(llm_chat_apply_template_v2(vision_, nullptr, &m, 1, 1, buf, sizeof(buf), &n), LLM_ERR_INVALID_ARGUMENT);
  one[0] = Text("\xc3");
  EXPECT_EQ(llm_chat_apply_template_v2(vision_, nullptr, &m, 1, 1, buf, sizeof(buf), &n), LLM_ERR_INVALID_UTF8);
  EXPECT_EQ(llm_chat_apply_template_v2(vision_, nullptr, nullptr, 1, 1, buf, sizeof(buf), &n), LLM_ERR_NULL_ARGUMENT);
}

}  // namespace
}  // namespace llm::test
