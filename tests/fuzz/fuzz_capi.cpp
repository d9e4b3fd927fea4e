// Fuzzes the C API's request validation: llm_submit with every llm_request
// field (struct_size, flags, prompt text or ids, sampling values, stop
// strings, n, priority, reserved fields, callback) taken from the input, on
// one context serving the bundled model. An accepted request is cancelled at
// once and drained to its final events; a rejected one must come with a
// message. llm_tokenize / llm_detokenize get the same text and ids.
#include <fuzzer/FuzzedDataProvider.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/common.h"
#include "llm.h"

namespace {

llm_ctx* Ctx() {
  static llm_ctx* ctx = [] {
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    const std::string path = llm::fuzz::SourceDir() + "/models/stories260K-f32.gguf";
    p.model_path = path.c_str();
    p.n_threads = 1;
    p.n_ctx = 64;
    p.max_seqs = 4;
    p.max_queued = 8;
    llm_ctx* c = nullptr;
    if (llm_ctx_create(&p, &c) != LLM_OK) {
      std::fprintf(stderr, "fuzz_capi: %s\n", llm_last_error());
      std::abort();
    }
    return c;
  }();
  return ctx;
}

struct Seen {
  int finals = 0;
};
void OnEvent(const llm_event* e, void* user) {
  if (e->type == LLM_EVENT_FINAL) static_cast<Seen*>(user)->finals++;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  llm_ctx* ctx = Ctx();

  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  const uint8_t sp_mask = in.ConsumeIntegral<uint8_t>();
  if (sp_mask & 1) sp.temperature = in.ConsumeFloatingPoint<float>();
  if (sp_mask & 2) sp.top_k = in.ConsumeIntegral<int32_t>();
  if (sp_mask & 4) sp.top_p = in.ConsumeFloatingPoint<float>();
  if (sp_mask & 8) sp.min_p = in.ConsumeFloatingPoint<float>();
  if (sp_mask & 16) {
    sp.repetition_penalty = in.ConsumeFloatingPoint<float>();
    sp.frequency_penalty = in.ConsumeFloatingPoint<float>();
    sp.presence_penalty = in.ConsumeFloatingPoint<float>();
  }
  if (sp_mask & 32) sp.penalty_last_n = in.ConsumeIntegral<int32_t>();
  if (sp_mask & 64) sp.seed = in.ConsumeIntegral<uint64_t>();
  if (sp_mask & 128) sp.struct_size = in.ConsumeIntegral<uint32_t>();

  llm_request r;
  llm_request_init(&r);
  const uint16_t mask = in.ConsumeIntegral<uint16_t>();
  if (mask & 1) r.struct_size = in.ConsumeIntegralInRange<uint32_t>(0, sizeof(llm_request) + 16);
  if (mask & 2) r.tokenize_flags = in.ConsumeIntegral<uint32_t>();
  r.max_tokens = (mask & 4) ? in.ConsumeIntegral<int32_t>() : in.ConsumeIntegralInRange<int32_t>(1, 8);
  r.n = (mask & 8) ? in.ConsumeIntegral<int32_t>() : in.ConsumeIntegralInRange<int32_t>(1, 3);
  if (mask & 16) r.priority = in.ConsumeIntegral<int32_t>();
  if (mask & 32) r.ignore_eos = in.ConsumeIntegral<int32_t>();
  if (mask & 64) r.prompt_logprobs = in.ConsumeIntegral<int32_t>();
  if (mask & 128) r.reserved0 = in.ConsumeIntegral<int32_t>();
  r.sampling = (mask & 256) ? &sp : nullptr;
  Seen seen;
  if (mask & 512) {
    r.callback = OnEvent;
    r.user_data = &seen;
  }

  std::vector<std::string> stop_store(4);  // fixed size: c_str() pointers stay put
  std::vector<const char*> stop_ptrs;
  const int n_stop = in.ConsumeIntegralInRange<int>(0, 4);
  for (int i = 0; i < n_stop; ++i) {
    if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {
      stop_ptrs.push_back(nullptr);
    } else {
      stop_store[i] = in.ConsumeRandomLengthString(16);
      stop_ptrs.push_back(stop_store[i].c_str());
    }
  }
  r.stop = stop_ptrs.empty() ? nullptr : stop_ptrs.data();
  r.n_stop = (mask & 1024) ? in.ConsumeIntegralInRange<int32_t>(-2, n_stop) : n_stop;

  std::vector<llm_token> tokens;
  std::string prompt;
  const bool use_tokens = (mask & 2048) != 0;
  if (use_tokens) {
    const int n_tok = in.ConsumeIntegralInRange<int>(0, 48);
    for (int i = 0; i < n_tok; ++i) {
      tokens.push_back((mask & 4096) ? in.ConsumeIntegral<int32_t>() : in.ConsumeIntegralInRange<int32_t>(0, 511));
    }
    r.prompt = nullptr;
    r.prompt_tokens = tokens.empty() && (mask & 8192) ? nullptr : tokens.data();
    r.n_prompt_tokens = (mask & 16384) ? in.ConsumeIntegral<int32_t>() : static_cast<int32_t>(tokens.size());
    if (r.n_prompt_tokens > static_cast<int32_t>(tokens.size())) r.n_prompt_tokens = static_cast<int32_t>(tokens.size());
  } else {
    prompt = in.ConsumeRemainingBytesAsString();
    r.prompt = prompt.c_str();  // stops at an embedded NUL, as a C caller's would
  }

  llm_request_id id = 0;
  const llm_status s = llm_submit(ctx, &r, &id);
  if (s == LLM_OK) {
    LLM_FUZZ_CHECK(id != 0, "id 0 for an accepted request");
    const llm_status c = llm_cancel(ctx, id);
    LLM_FUZZ_CHECK(c == LLM_OK || c == LLM_ERR_NOT_FOUND, llm_status_str(c));
    // Drain: every sequence of the request must end with one final event.
    int finals = 0;
    const int want = r.n;
    llm_event ev[8];
    const auto t0 = std::chrono::steady_clock::now();
    while (finals + seen.finals < want) {
      uint32_t n = 0;
      ev[0].struct_size = sizeof(llm_event);
      LLM_FUZZ_CHECK(llm_poll(ctx, ev, 8, &n, 100) == LLM_OK, llm_last_error());
      for (uint32_t i = 0; i < n; ++i) {
        if (ev[i].request_id == id && ev[i].type == LLM_EVENT_FINAL) finals++;
      }
      LLM_FUZZ_CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20),
                     "a cancelled request did not end");
    }
    LLM_FUZZ_CHECK(finals + seen.finals == want, "more final events than sequences");
  } else {
    LLM_FUZZ_CHECK(id == 0, "out_id written on failure");
    LLM_FUZZ_CHECK(llm_last_error()[0] != '\0', llm_status_str(s));
  }

  // The tokenizer entry points on the same text and ids.
  int32_t n_ids = 0;
  llm_token ids[64];
  const uint32_t tflags = (mask >> 14) & 3;
  llm_status ts = llm_tokenize(ctx, prompt.data(), prompt.size(), tflags, ids, 64, &n_ids);
  LLM_FUZZ_CHECK(ts == LLM_OK || ts == LLM_ERR_INVALID_UTF8 || ts == LLM_ERR_BUFFER_TOO_SMALL, llm_status_str(ts));
  if (!tokens.empty()) {
    char buf[256];
    size_t nb = 0;
    llm_status ds = llm_detokenize(ctx, tokens.data(), static_cast<int32_t>(tokens.size()), tflags, buf, sizeof buf, &nb);
    LLM_FUZZ_CHECK(ds == LLM_OK || ds == LLM_ERR_INVALID_ARGUMENT || ds == LLM_ERR_BUFFER_TOO_SMALL,
                   llm_status_str(ds));
  }
  return 0;
}
