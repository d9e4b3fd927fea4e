// Checks include/llm.hpp: golden greedy output, errors as llm::Error, RAII
// moves. A plain program (exit status); bindings/ci.sh builds and runs it.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "llm.hpp"

static int failures = 0;
#define CHECK(c)                                                   \
  do {                                                             \
    if (!(c)) {                                                    \
      std::fprintf(stderr, "%s:%d: CHECK(%s)\n", __FILE__, __LINE__, #c); \
      ++failures;                                                  \
    }                                                              \
  } while (0)

int main() {
  // Golden: "Once upon a time", greedy, first 16 of the 200 reference tokens.
  const std::vector<llm_token> golden = {432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337};
  llm::Context ctx;
  llm::Sampling greedy = llm::Sampling::greedy();
  llm::Request req("Once upon a time");
  req.max_tokens = static_cast<int32_t>(golden.size());
  req.sampling = &greedy;
  std::string streamed;
  llm::Result r = llm::generate(ctx, req, [&](std::string_view p) { streamed += p; });
  CHECK(r.tokens == golden);
  CHECK(r.finish_reason == LLM_FINISH_LENGTH);
  CHECK(streamed == r.text);
  CHECK(ctx.detokenize(golden) == r.text);
  CHECK((ctx.tokenize("Once upon a time") == std::vector<llm_token>{1, 403, 407, 261, 378}));

  llm::Context moved = std::move(ctx);
  CHECK(ctx.get() == nullptr && moved.get() != nullptr);
  CHECK(std::string(moved.model_info().arch) == "llama");

  try {
    llm::Context::from_file("/nonexistent/model.gguf");
    CHECK(false);
  } catch (const llm::Error& e) {
    CHECK(e.status() == LLM_ERR_IO);
    CHECK(std::string(e.what()).find("/nonexistent/model.gguf") != std::string::npos);
  }
  llm::Request bad("x");
  bad.max_tokens = 0;
  try {
    moved.submit(bad);
    CHECK(false);
  } catch (const llm::Error& e) {
    CHECK(e.status() == LLM_ERR_INVALID_ARGUMENT);
  }
  std::printf("%s\n", failures == 0 ? "llm.hpp: ok" : "llm.hpp: FAILED");
  return failures == 0 ? 0 : 1;
}
