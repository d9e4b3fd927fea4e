// The C API's contract: bad input gets a status and a message and leaves the
// context serving; cancellation, parallel samples, stop strings, seeds,
// backpressure; no leak across many requests (run under ASan in CI).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <cstddef>
#include <fstream>
#include <limits>
#include <thread>

#include "llm.h"
#include "support/api_helpers.h"
#include "support/test_paths.h"

namespace llm::test {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "llmrt_" + std::to_string(::getpid()) + "_" + name;
}

std::string ModelBytes() { return ReadFile(ModelPathF32()); }

// Defaults for a one-thread CPU context on `path` (which must outlive it).
llm_ctx_params CpuParams(const std::string& path) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.backend = LLM_BACKEND_CPU;
  p.model_path = path.c_str();
  p.n_threads = 1;
  return p;
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Offset of the tensor-info record field `type` for tensor `name` in a GGUF
// file: name (u64 length + bytes), n_dims (u32), dims (u64 each), type (u32),
// offset (u64).
size_t TensorTypeOffset(const std::string& file, const std::string& name) {
  std::string key(8, '\0');
  uint64_t len = name.size();
  std::memcpy(key.data(), &len, 8);
  key += name;
  size_t at = file.find(key);
  if (at == std::string::npos) return 0;
  size_t p = at + key.size();
  uint32_t n_dims;
  std::memcpy(&n_dims, file.data() + p, 4);
  return p + 4 + 8 * n_dims;
}

llm_status CreateFrom(const std::string& path, llm_ctx** ctx) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = path.c_str();
  return llm_ctx_create(&p, ctx);
}

// One context shared by the bad-request tests: each must leave it usable.
class Api : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    p.model_path = nullptr;
    std::string path = ModelPathF32();
    p.model_path = path.c_str();
    p.n_threads = 2;
    p.n_ctx = 128;
    ASSERT_EQ(llm_ctx_create(&p, &ctx_), LLM_OK) << llm_last_error();
  }
  static void TearDownTestSuite() { llm_ctx_destroy(ctx_); ctx_ = nullptr; }
  void TearDown() override {
    // Whatever the test did, the context still serves a normal request.
    SeqResult r = Generate(ctx_, "Once upon a time", 8);
    EXPECT_EQ(r.status, LLM_OK);
    EXPECT_EQ(r.tokens.size(), 8u);
  }
  static llm_status Submit(const llm_request& r) {
    llm_request_id id = 0;
    llm_status s = llm_submit(ctx_, &r, &id);
    if (s != LLM_OK) {
      EXPECT_EQ(id, 0u);
      EXPECT_STRNE(llm_last_error(), "") << "a failure must come with a message";
    }
    return s;
  }
  static llm_ctx* ctx_;
};
llm_ctx* Api::ctx_ = nullptr;

// ------------------------------------------------------------ bad input

TEST_F(Api, NullPointers) {
  llm_request r;
  llm_request_init(&r);
  r.prompt = "hi";
  llm_request_id id;
  EXPECT_EQ(llm_submit(nullptr, &r, &id), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_submit(ctx_, nullptr, &id), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_submit(ctx_, &r, nullptr), LLM_ERR_NULL_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("NULL"), std::string::npos);
  EXPECT_EQ(llm_ctx_create(nullptr, nullptr), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_ctx_params_init(nullptr), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_request_init(nullptr), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_sampling_params_init(nullptr), LLM_ERR_NULL_ARGUMENT);
  uint32_t n;
  EXPECT_EQ(llm_poll(nullptr, nullptr, 0, &n, 0), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_poll(ctx_, nullptr, 0, nullptr, 0), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_poll(ctx_, nullptr, 4, &n, 0), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_cancel(nullptr, 1), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_wakeup(nullptr), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_get_stats(ctx_, nullptr), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_model_get_info(nullptr, nullptr), LLM_ERR_NULL_ARGUMENT);
  int32_t nt;
  EXPECT_EQ(llm_tokenize(ctx_, nullptr, 5, 0, nullptr, 0, &nt), LLM_ERR_NULL_ARGUMENT);
  EXPECT_EQ(llm_tokenize(ctx_, "abc", 3, 0, nullptr, 4, &nt), LLM_ERR_NULL_ARGUMENT);
  size_t nb;
  EXPECT_EQ(llm_detokenize(ctx_, nullptr, 3, 0, nullptr, 0, &nb), LLM_ERR_NULL_ARGUMENT);
  r.prompt = nullptr;  // neither text nor tokens
  EXPECT_EQ(Submit(r), LLM_ERR_NULL_ARGUMENT);
  const char* stops[] = {"a", nullptr};
  r.prompt = "hi";
  r.stop = stops;
  r.n_stop = 2;
  EXPECT_EQ(Submit(r), LLM_ERR_NULL_ARGUMENT);
  llm_ctx_destroy(nullptr);
}

TEST_F(Api, StructSizeTooSmallOrUnknownLarger) {
  llm_request r;
  llm_request_init(&r);
  r.prompt = "hi";
  r.struct_size = 8;
  EXPECT_EQ(Submit(r), LLM_ERR_STRUCT_SIZE);
  r.struct_size = sizeof(llm_request) + 8;
  EXPECT_EQ(Submit(r), LLM_ERR_STRUCT_SIZE);
  r.struct_size = 0;
  EXPECT_EQ(Submit(r), LLM_ERR_STRUCT_SIZE);

  llm_request_init(&r);
  r.prompt = "hi";
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.struct_size = 4;
  r.sampling = &sp;
  EXPECT_EQ(Submit(r), LLM_ERR_STRUCT_SIZE);

  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.struct_size = sizeof(p) * 2;
  llm_ctx* c = reinterpret_cast<llm_ctx*>(1);
  EXPECT_EQ(llm_ctx_create(&p, &c), LLM_ERR_STRUCT_SIZE);
  EXPECT_EQ(c, nullptr);

  llm_stats st{};
  st.struct_size = 3;
  EXPECT_EQ(llm_get_stats(ctx_, &st), LLM_ERR_STRUCT_SIZE);
  llm_event ev[2];
  ev[0].struct_size = 12;
  uint32_t n;
  EXPECT_EQ(llm_poll(ctx_, ev, 2, &n, 0), LLM_ERR_STRUCT_SIZE);
}

TEST_F(Api, MaxTokensZero) {
  llm_request r;
  llm_request_init(&r);
  r.prompt = "hi";
  r.max_tokens = 0;
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("max_tokens"), std::string::npos);
  r.max_tokens = -5;
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_ARGUMENT);
}

TEST_F(Api, NegativeTemperature) {
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = -0.5f;
  llm_request r;
  llm_request_init(&r);
  r.prompt = "hi";
  r.sampling = &sp;
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("temperature"), std::string::npos);
  sp.temperature = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_ARGUMENT);
}

TEST_F(Api, TopPAboveOne) {
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.top_p = 1.5f;
  llm_request r;
  llm_request_init(&r);
  r.prompt = "hi";
  r.sampling = &sp;
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("top_p"), std::string::npos);
  sp.top_p = 0.9f;
  sp.top_k = -1;
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_ARGUMENT);
  sp.top_k = 40;
  sp.min_p = 2.0f;
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_ARGUMENT);
}

TEST_F(Api, InvalidUtf8Prompt) {
  llm_request r;
  llm_request_init(&r);
  r.prompt = "Once \xC3\x28 upon";  // a lead byte without its continuation
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_UTF8);
  r.prompt = "\xED\xA0\x80";  // an encoded surrogate
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_UTF8);
  int32_t n;
  EXPECT_EQ(llm_tokenize(ctx_, "\xFF", 1, 0, nullptr, 0, &n), LLM_ERR_INVALID_UTF8);
  const char* bad_stop[] = {"\xC0\x80"};
  r.prompt = "hi";
  r.stop = bad_stop;
  r.n_stop = 1;
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_UTF8);
}

TEST_F(Api, StopStringsHaveALengthLimit) {
  llm_request r;
  llm_request_init(&r);
  r.prompt = "hi";
  r.max_tokens = 4;
  const std::string at_limit(4096, 'x'), over(4097, 'x');
  const char* stops[] = {at_limit.c_str()};
  r.stop = stops;
  r.n_stop = 1;
  llm_request_id id = 0;
  ASSERT_EQ(llm_submit(ctx_, &r, &id), LLM_OK) << llm_last_error();
  llm_cancel(ctx_, id);
  for (bool done = false; !done;) {  // drain it: the fixture's context is shared
    llm_event ev[8];
    for (llm_event& e : ev) e.struct_size = sizeof e;
    uint32_t n = 0;
    ASSERT_EQ(llm_poll(ctx_, ev, 8, &n, 1000), LLM_OK);
    for (uint32_t i = 0; i < n; ++i) done |= ev[i].request_id == id && ev[i].type == LLM_EVENT_FINAL;
  }
  stops[0] = over.c_str();
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("4096"), std::string::npos) << llm_last_error();
}

TEST_F(Api, PromptLongerThanContext) {
  std::string long_prompt;
  for (int i = 0; i < 100; ++i) long_prompt += "Once upon a time ";
  llm_request r;
  llm_request_init(&r);
  r.prompt = long_prompt.c_str();  // ~400 tokens, n_ctx is 128
  EXPECT_EQ(Submit(r), LLM_ERR_CONTEXT_OVERFLOW);
  EXPECT_NE(std::string(llm_last_error()).find("context"), std::string::npos);
}

// A prompt longer than any tokenization of it could fit is refused before
// the tokenizer runs (its message counts bytes, not tokens).
TEST_F(Api, PromptFarLongerThanContextIsRefusedBeforeTokenizing) {
  const std::string huge(8u << 20, 'a');
  llm_request r;
  llm_request_init(&r);
  r.prompt = huge.c_str();
  r.max_tokens = 4;
  EXPECT_EQ(Submit(r), LLM_ERR_CONTEXT_OVERFLOW);
  EXPECT_NE(std::string(llm_last_error()).find("bytes"), std::string::npos) << llm_last_error();
}

TEST_F(Api, TokenIdsOutOfVocabulary) {
  llm_token toks[] = {1, 99999};
  llm_request r;
  llm_request_init(&r);
  r.prompt_tokens = toks;
  r.n_prompt_tokens = 2;
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_ARGUMENT);
  toks[1] = -3;
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_ARGUMENT);
  char buf[16];
  size_t nb;
  EXPECT_EQ(llm_detokenize(ctx_, toks, 2, 0, buf, sizeof buf, &nb), LLM_ERR_INVALID_ARGUMENT);
}

TEST_F(Api, OtherBadRequestFields) {
  llm_request r;
  llm_request_init(&r);
  r.prompt = "hi";
  r.n = 0;
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_ARGUMENT);
  r.n = 1;
  r.reserved0 = 7;
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_ARGUMENT);
  r.reserved0 = 0;
  r.tokenize_flags = 0x80;
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_ARGUMENT);
  r.tokenize_flags = 0;
  r.prompt = "";  // no BOS, no text: nothing to run
  EXPECT_EQ(Submit(r), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_cancel(ctx_, 123456789), LLM_ERR_NOT_FOUND);
}

TEST_F(Api, TokenizeBufferTooSmallReportsSize) {
  int32_t n = 0;
  llm_token one[1];
  EXPECT_EQ(llm_tokenize(ctx_, "Once upon a time", 16, LLM_TOKENIZE_ADD_SPECIAL, one, 1, &n),
            LLM_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 5);
  llm_token ids[5];
  ASSERT_EQ(llm_tokenize(ctx_, "Once upon a time", 16, LLM_TOKENIZE_ADD_SPECIAL, ids, 5, &n), LLM_OK);
  char small[4];
  size_t nb = 0;
  EXPECT_EQ(llm_detokenize(ctx_, ids, 5, LLM_DETOKENIZE_STRIP_LEADING_SPACE, small, 4, &nb), LLM_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(nb, 16u);
  char buf[32];
  ASSERT_EQ(llm_detokenize(ctx_, ids, 5, LLM_DETOKENIZE_STRIP_LEADING_SPACE, buf, sizeof buf, &nb), LLM_OK);
  EXPECT_EQ(std::string(buf, nb), "Once upon a time");
}

// ------------------------------------------------------------ bad model files

TEST(ApiModelFiles, MissingFile) {
  llm_ctx* ctx = nullptr;
  EXPECT_EQ(CreateFrom("/nonexistent/model.gguf", &ctx), LLM_ERR_IO);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_NE(std::string(llm_last_error()).find("/nonexistent/model.gguf"), std::string::npos);
}

TEST(ApiModelFiles, TruncatedGguf) {
  std::string bytes = ModelBytes();
  ASSERT_GT(bytes.size(), 4096u);
  for (size_t cut : {size_t{0}, size_t{3}, size_t{20}, size_t{1000}, size_t{6000}}) {
    std::string path = TempPath("trunc.gguf");
    WriteBytes(path, bytes.substr(0, cut));
    llm_ctx* ctx = nullptr;
    EXPECT_EQ(CreateFrom(path, &ctx), LLM_ERR_MODEL_FORMAT) << "cut at " << cut << ": " << llm_last_error();
    EXPECT_EQ(ctx, nullptr);
    std::remove(path.c_str());
  }
}

TEST(ApiModelFiles, TensorPastEndOfFile) {
  std::string bytes = ModelBytes();
  std::string path = TempPath("short.gguf");
  WriteBytes(path, bytes.substr(0, bytes.size() - 100));  // the last tensor's data is cut
  llm_ctx* ctx = nullptr;
  EXPECT_EQ(CreateFrom(path, &ctx), LLM_ERR_MODEL_FORMAT);
  EXPECT_STRNE(llm_last_error(), "");
  // A tensor whose offset points far beyond the file.
  std::string moved = bytes;
  size_t at = TensorTypeOffset(moved, "output_norm.weight");
  ASSERT_NE(at, 0u);
  uint64_t far = uint64_t{1} << 40;
  std::memcpy(moved.data() + at + 4, &far, 8);
  WriteBytes(path, moved);
  EXPECT_EQ(CreateFrom(path, &ctx), LLM_ERR_MODEL_FORMAT);
  EXPECT_NE(std::string(llm_last_error()).find("output_norm.weight"), std::string::npos) << llm_last_error();
  std::remove(path.c_str());
}

TEST(ApiModelFiles, UnknownTensorType) {
  std::string bytes = ModelBytes();
  size_t at = TensorTypeOffset(bytes, "blk.0.attn_q.weight");
  ASSERT_NE(at, 0u);
  uint32_t bogus = 77;
  std::memcpy(bytes.data() + at, &bogus, 4);
  std::string path = TempPath("badtype.gguf");
  WriteBytes(path, bytes);
  llm_ctx* ctx = nullptr;
  llm_status s = CreateFrom(path, &ctx);
  EXPECT_TRUE(s == LLM_ERR_UNSUPPORTED || s == LLM_ERR_MODEL_FORMAT) << llm_status_str(s);
  EXPECT_NE(std::string(llm_last_error()).find("77"), std::string::npos) << llm_last_error();
  EXPECT_EQ(ctx, nullptr);
  std::remove(path.c_str());
}

TEST(ApiModelFiles, BadContextParams) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  llm_ctx* ctx = nullptr;
  p.backend = 9;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_INVALID_ARGUMENT);
  llm_ctx_params_init(&p);
  p.n_threads = -2;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_INVALID_ARGUMENT);
  llm_ctx_params_init(&p);
  p.n_ctx = -1;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctx, nullptr);
}

// gpu_memory_fraction: (0, 1], 0 = default; checked before the model loads and
// whatever the backend, so these fail the same on a machine without a GPU.
TEST(ApiModelFiles, GpuMemoryFractionOutOfRange) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  EXPECT_EQ(p.gpu_memory_fraction, 0.0f);  // 0 = the default 0.90
  EXPECT_EQ(p.reserved2, 0);
  const float bad[] = {-0.1f, 1.0001f, 2.0f, -std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  for (float f : bad) {
    llm_ctx_params_init(&p);
    p.backend = LLM_BACKEND_CPU;
    p.gpu_memory_fraction = f;
    llm_ctx* ctx = reinterpret_cast<llm_ctx*>(1);
    EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_INVALID_ARGUMENT) << f;
    EXPECT_EQ(ctx, nullptr);
    EXPECT_NE(std::string(llm_last_error()).find("gpu_memory_fraction"), std::string::npos) << llm_last_error();
  }
  llm_ctx_params_init(&p);
  p.reserved2 = 1;
  llm_ctx* ctx = nullptr;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("reserved2"), std::string::npos) << llm_last_error();
}

TEST(ApiModelFiles, GpuMemoryFractionInRangeIsAcceptedAndIgnoredByCpu) {
  const std::string path = ModelPathF32();
  for (float f : {0.0f, 0.05f, 0.5f, 1.0f}) {
    llm_ctx_params p = CpuParams(path);
    p.gpu_memory_fraction = f;
    llm_ctx* ctx = nullptr;
    ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << f << ": " << llm_last_error();
    llm_ctx_destroy(ctx);
  }
}

// A caller built against the header before gpu_memory_fraction (struct_size
// 72 on LP64, ending at reserved1) gets the default: whatever lies past its
// struct in memory is never read, even a value that would be rejected.
TEST(ApiModelFiles, OlderCtxParamsGetDefaultGpuMemoryFraction) {
  const std::string path = ModelPathF32();
  llm_ctx_params p = CpuParams(path);
  p.struct_size = static_cast<uint32_t>(offsetof(llm_ctx_params, gpu_memory_fraction));
  p.gpu_memory_fraction = -7.0f;  // beyond the old struct: must not be seen
  p.reserved2 = 99;
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  llm_ctx_destroy(ctx);
  // The same bytes with the full struct_size are read and rejected.
  p.struct_size = sizeof(llm_ctx_params);
  ctx = nullptr;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctx, nullptr);
}

// preempt_mode / swap_space_bytes: modes and sizes that make no sense are
// INVALID_ARGUMENT; sizes in whole KV blocks of the backend's format.
TEST(ApiModelFiles, PreemptModeAndSwapSpaceAreChecked) {
  const std::string path = ModelPathF32();
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  EXPECT_EQ(p.preempt_mode, LLM_PREEMPT_RECOMPUTE);
  EXPECT_EQ(p.swap_space_bytes, 0u);
  auto create = [&](int32_t mode, uint64_t bytes, llm_ctx** ctx) {
    p = CpuParams(path);
    p.n_kv_blocks = 32;
    p.preempt_mode = mode;
    p.swap_space_bytes = bytes;
    *ctx = nullptr;
    return llm_ctx_create(&p, ctx);
  };
  llm_ctx* ctx = nullptr;
  for (int32_t bad : {-1, 2, 1000}) {
    EXPECT_EQ(create(bad, 0, &ctx), LLM_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(std::string(llm_last_error()).find("preempt_mode"), std::string::npos) << llm_last_error();
  }
  EXPECT_EQ(create(LLM_PREEMPT_RECOMPUTE, 1u << 20, &ctx), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("swap_space_bytes"), std::string::npos) << llm_last_error();
  EXPECT_EQ(create(LLM_PREEMPT_SWAP, 100, &ctx), LLM_ERR_INVALID_ARGUMENT);  // less than one block
  EXPECT_NE(std::string(llm_last_error()).find("holds no KV block"), std::string::npos) << llm_last_error();
  EXPECT_EQ(create(LLM_PREEMPT_SWAP, UINT64_MAX, &ctx), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctx, nullptr);

  llm_stats st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(create(LLM_PREEMPT_SWAP, 0, &ctx), LLM_OK) << llm_last_error();
  ASSERT_EQ(llm_get_stats(ctx, &st), LLM_OK);
  EXPECT_EQ(st.swap_blocks_total, 32);  // default: the pool's size
  EXPECT_EQ(st.swap_blocks_used, 0);
  const SeqResult r = Generate(ctx, "Once upon a time", 8);
  EXPECT_EQ(r.tokens.size(), 8u);
  llm_ctx_destroy(ctx);
  ASSERT_EQ(create(LLM_PREEMPT_RECOMPUTE, 0, &ctx), LLM_OK) << llm_last_error();
  ASSERT_EQ(llm_get_stats(ctx, &st), LLM_OK);
  EXPECT_EQ(st.swap_blocks_total, 0);
  llm_ctx_destroy(ctx);
}

// A caller built before swap_space_bytes (struct_size ends at reserved2)
// gets the default swap space; what lies past its struct is never read.
TEST(ApiModelFiles, OlderCtxParamsGetDefaultSwapSpace) {
  const std::string path = ModelPathF32();
  llm_ctx_params p = CpuParams(path);
  p.n_kv_blocks = 24;
  p.preempt_mode = LLM_PREEMPT_SWAP;  // the old reserved0: inside every version
  p.struct_size = static_cast<uint32_t>(offsetof(llm_ctx_params, swap_space_bytes));
  p.swap_space_bytes = 7;  // beyond the old struct: must not be seen
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  llm_stats st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(llm_get_stats(ctx, &st), LLM_OK);
  EXPECT_EQ(st.swap_blocks_total, 24);
  llm_ctx_destroy(ctx);
  // A stats struct from before the swap figures gets only what it has room for.
  p = CpuParams(path);
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  alignas(llm_stats) unsigned char buf[sizeof(llm_stats) + 8];
  std::memset(buf, 0xAB, sizeof buf);
  auto* old = reinterpret_cast<llm_stats*>(buf);
  old->struct_size = static_cast<uint32_t>(offsetof(llm_stats, swap_outs));
  ASSERT_EQ(llm_get_stats(ctx, old), LLM_OK);
  for (size_t i = offsetof(llm_stats, swap_outs); i < sizeof buf; ++i) ASSERT_EQ(buf[i], 0xAB) << i;
  llm_ctx_destroy(ctx);
}

// ------------------------------------------------------------ behaviour

TEST_F(Api, CancelMidPrefill) {
  // A one-token budget per step makes the ~400-token prompt take ~400 engine
  // steps (tens of milliseconds): the cancel, sent right after the submit,
  // lands during the prefill even on a busy machine.
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  std::string path = ModelPathF32();
  p.model_path = path.c_str();
  p.max_batch_tokens = 1;
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK);
  std::string prompt;
  for (int i = 0; i < 100; ++i) prompt += "Once upon a time ";
  llm_request r;
  llm_request_init(&r);
  r.prompt = prompt.c_str();
  r.max_tokens = 50;
  llm_request_id id;
  ASSERT_EQ(llm_submit(ctx, &r, &id), LLM_OK);
  ASSERT_EQ(llm_cancel(ctx, id), LLM_OK);
  SeqResult res = WaitFor(ctx, id)[0];
  EXPECT_EQ(res.finish_reason, LLM_FINISH_CANCELLED);
  EXPECT_EQ(res.tokens.size(), 0u);
  EXPECT_EQ(llm_cancel(ctx, id), LLM_ERR_NOT_FOUND);
  llm_ctx_destroy(ctx);
}

// llm_get_stats right after a cancel: the cancelled sequence's blocks are
// free and nothing runs, though no engine step follows the cancel.
TEST(ApiStats, CancelledRequestLeavesNothingRunning) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  std::string path = ModelPathF32();
  p.model_path = path.c_str();
  p.n_threads = 2;
  p.n_ctx = 4096;
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0;
  llm_request r;
  llm_request_init(&r);
  r.prompt = "Once upon a time";
  r.max_tokens = 4000;
  r.ignore_eos = 1;
  r.sampling = &sp;
  llm_request_id id = 0;
  ASSERT_EQ(llm_submit(ctx, &r, &id), LLM_OK);
  llm_event ev[8];
  ev[0].struct_size = sizeof(llm_event);
  uint32_t n = 0;
  ASSERT_EQ(llm_poll(ctx, ev, 8, &n, 10000), LLM_OK);  // running: it has produced a token
  ASSERT_GT(n, 0u);
  ASSERT_EQ(llm_cancel(ctx, id), LLM_OK);
  SeqResult res = WaitFor(ctx, id)[0];
  // 4000 tokens are far more than the engine makes between the first polled
  // token and the cancel, so the request is still running when cancelled.
  ASSERT_EQ(res.finish_reason, LLM_FINISH_CANCELLED);
  llm_stats st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(llm_get_stats(ctx, &st), LLM_OK);
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.waiting, 0);
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total);
  llm_ctx_destroy(ctx);
}

TEST_F(Api, StopStringEndsTheTextBeforeIt) {
  SeqResult full = Generate(ctx_, "Once upon a time", 40);
  ASSERT_NE(full.text.find("Lily"), std::string::npos);
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0;
  const char* stops[] = {"Lily"};
  llm_request r;
  llm_request_init(&r);
  r.prompt = "Once upon a time";
  r.max_tokens = 40;
  r.sampling = &sp;
  r.stop = stops;
  r.n_stop = 1;
  llm_request_id id;
  ASSERT_EQ(llm_submit(ctx_, &r, &id), LLM_OK);
  SeqResult res = WaitFor(ctx_, id)[0];
  EXPECT_EQ(res.finish_reason, LLM_FINISH_STOP);
  EXPECT_EQ(res.text, full.text.substr(0, full.text.find("Lily")));
}

TEST_F(Api, ParallelSamplesAndSeeds) {
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.seed = 7;
  llm_request r;
  llm_request_init(&r);
  r.prompt = "The little dog";
  r.max_tokens = 30;
  r.sampling = &sp;
  r.n = 3;
  r.ignore_eos = 1;
  llm_request_id id;
  ASSERT_EQ(llm_submit(ctx_, &r, &id), LLM_OK);
  auto a = WaitFor(ctx_, id, 3);
  ASSERT_EQ(llm_submit(ctx_, &r, &id), LLM_OK);
  auto b = WaitFor(ctx_, id, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a[i].n_final, 1);
    EXPECT_EQ(a[i].tokens.size(), 30u);
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "same seed, same output";
  }
  EXPECT_NE(a[0].tokens, a[1].tokens) << "samples of one request differ";
}

TEST(ApiThreads, SameSeedSameOutputOnAnyThreadCount) {
  std::vector<std::vector<llm_token>> outs;
  for (int threads : {1, 2, 3}) {
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    std::string path = ModelPathF32();
    p.model_path = path.c_str();
    p.n_threads = threads;
    llm_ctx* ctx = nullptr;
    ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK);
    llm_sampling_params sp;
    llm_sampling_params_init(&sp);
    sp.temperature = 0.9f;
    sp.seed = 1234;
    outs.push_back(Generate(ctx, "Lily wanted to", 100, &sp).tokens);
    llm_ctx_destroy(ctx);
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
}

TEST(ApiQueue, FullQueueReturnsBusy) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  std::string path = ModelPathF32();
  p.model_path = path.c_str();
  p.max_queued = 2;
  p.max_seqs = 1;
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK);
  llm_request r;
  llm_request_init(&r);
  r.prompt = "Once upon a time";
  r.max_tokens = 200;
  r.ignore_eos = 1;
  int busy = 0, ok = 0;
  for (int i = 0; i < 20; ++i) {
    llm_request_id id;
    llm_status s = llm_submit(ctx, &r, &id);
    if (s == LLM_ERR_BUSY) busy++;
    if (s == LLM_OK) ok++;
  }
  EXPECT_GT(busy, 0);
  EXPECT_GE(ok, 2);
  llm_ctx_destroy(ctx);  // cancels what is in flight
}

TEST(ApiLifecycle, HundredRequestsThenDestroy) {
  // Under ASan/LSan this is the leak check: create -> 100 requests -> destroy,
  // some finished, some cancelled, some still running at destroy.
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  std::string path = ModelPathF32();
  p.model_path = path.c_str();
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(llm_ctx_create(&p, &ctx), LLM_OK);
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.seed = 1;
  std::vector<llm_request_id> ids;
  for (int i = 0; i < 100; ++i) {
    llm_request r;
    llm_request_init(&r);
    r.prompt = i % 2 ? "Once upon a time" : "The sun was";
    r.max_tokens = 16 + i % 7;
    r.sampling = &sp;
    llm_request_id id;
    ASSERT_EQ(llm_submit(ctx, &r, &id), LLM_OK) << llm_last_error();
    ids.push_back(id);
    if (i % 10 == 3) llm_cancel(ctx, id);
  }
  // Drain until 60 requests have ended (cancelled ones included).
  int finals = 0;
  llm_event ev[16];
  for (int spins = 0; finals < 60 && spins < 3000; ++spins) {
    uint32_t n = 0;
    ev[0].struct_size = sizeof(llm_event);
    ASSERT_EQ(llm_poll(ctx, ev, 16, &n, 20), LLM_OK);
    for (uint32_t k = 0; k < n; ++k) finals += ev[k].type == LLM_EVENT_FINAL;
  }
  EXPECT_GE(finals, 60);
  llm_stats st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(llm_get_stats(ctx, &st), LLM_OK);
  EXPECT_EQ(st.requests_submitted, 100u);
  EXPECT_GE(st.requests_finished, 60u);
  llm_ctx_destroy(ctx);
}

TEST(ApiLifecycle, ModelInfoAndVersion) {
  llm_ctx* ctx = nullptr;
  ASSERT_EQ(CreateFrom(ModelPathF32(), &ctx), LLM_OK);
  llm_model_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(llm_model_get_info(ctx, &info), LLM_OK);
  EXPECT_EQ(info.n_vocab, 512);
  EXPECT_EQ(info.n_layer, 5);
  EXPECT_EQ(info.n_embd, 64);
  EXPECT_EQ(info.bos, 1);
  EXPECT_EQ(info.eos, 2);
  EXPECT_STREQ(info.arch, "llama");
  EXPECT_STREQ(llm_status_str(LLM_ERR_BUSY), "LLM_ERR_BUSY");
  EXPECT_STREQ(llm_status_str(12345), "LLM_ERR_UNKNOWN");
  llm_ctx_destroy(ctx);
}

}  // namespace
}  // namespace llm::test
