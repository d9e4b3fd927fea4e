/* The embedding API from C (compiled as C11): the new fields' defaults,
 * llm_embed's argument checks, and the clear refusal of a context whose
 * model (the built-in story model) makes no embeddings, through both the
 * blocking call and an LLM_TASK_EMBED request. The vectors themselves are
 * checked against llama.cpp in tests/test_embeddings.cpp. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "llm.h"

static int g_failures = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      g_failures++;                                                            \
    }                                                                          \
  } while (0)

int main(void) {
  llm_request r;
  CHECK(llm_request_init(&r) == LLM_OK);
  CHECK(r.task == LLM_TASK_GENERATE && r.pooling == LLM_POOLING_MODEL && r.normalize == 1);
  CHECK(r.dimensions == 0 && r.truncate == 0 && r.reserved2 == 0);
  llm_embed_params p;
  CHECK(llm_embed_params_init(&p) == LLM_OK);
  CHECK(p.struct_size == sizeof p && p.pooling == LLM_POOLING_MODEL && p.normalize == 1);
  CHECK(p.tokenize_flags == LLM_TOKENIZE_ADD_SPECIAL && p.dimensions == 0 && p.truncate == 0);
  CHECK(llm_embed_params_init(NULL) == LLM_ERR_NULL_ARGUMENT);

  llm_ctx* ctx = NULL;
  if (llm_ctx_create(NULL, &ctx) != LLM_OK) {
    fprintf(stderr, "llm_ctx_create: %s\n", llm_last_error());
    return 1;
  }
  const llm_token toks[3] = {1, 50, 60};
  const llm_token* inputs[1] = {toks};
  const int32_t lens[1] = {3};
  float out[1024];
  int32_t dim = -1;
  CHECK(llm_embed(NULL, NULL, inputs, lens, 1, NULL, out, 1024, &dim) == LLM_ERR_NULL_ARGUMENT);
  CHECK(llm_embed(ctx, NULL, inputs, lens, 1, NULL, out, 1024, NULL) == LLM_ERR_NULL_ARGUMENT);
  CHECK(llm_embed(ctx, NULL, NULL, NULL, 1, NULL, out, 1024, &dim) == LLM_ERR_NULL_ARGUMENT);
  CHECK(llm_embed(ctx, NULL, inputs, lens, 0, NULL, out, 1024, &dim) == LLM_ERR_INVALID_ARGUMENT);
  p.struct_size = 3;
  CHECK(llm_embed(ctx, NULL, inputs, lens, 1, &p, out, 1024, &dim) == LLM_ERR_STRUCT_SIZE);
  CHECK(llm_embed(ctx, NULL, inputs, lens, 1, NULL, out, 1024, &dim) == LLM_ERR_UNSUPPORTED);
  CHECK(strstr(llm_last_error(), "does not make embeddings") != NULL);
  const char* texts[1] = {"Once upon a time"};
  CHECK(llm_embed(ctx, texts, NULL, NULL, 1, NULL, out, 1024, &dim) == LLM_ERR_UNSUPPORTED);

  r.prompt = "Once upon a time";
  r.task = LLM_TASK_EMBED;
  llm_request_id id = 0;
  CHECK(llm_submit(ctx, &r, &id) == LLM_ERR_UNSUPPORTED);
  r.task = 5;
  CHECK(llm_submit(ctx, &r, &id) == LLM_ERR_INVALID_ARGUMENT);
  /* an older caller's llm_request (before 0.4) still generates */
  r.task = LLM_TASK_GENERATE;
  r.max_tokens = 4;
  r.struct_size = (uint32_t)offsetof(llm_request, task);
  CHECK(llm_submit(ctx, &r, &id) == LLM_OK);
  llm_event ev[8];
  int finals = 0;
  for (int tries = 0; tries < 200 && finals == 0; ++tries) {
    uint32_t n = 0;
    ev[0].struct_size = (uint32_t)offsetof(llm_event, embedding); /* an older caller's llm_event */
    CHECK(llm_poll(ctx, ev, 8, &n, 100) == LLM_OK);
    for (uint32_t i = 0; i < n; ++i) {
      const llm_event* e = (const llm_event*)((const char*)ev + (size_t)i * offsetof(llm_event, embedding));
      if (e->type == LLM_EVENT_FINAL) finals++;
    }
  }
  CHECK(finals == 1);
  llm_ctx_destroy(ctx);
  if (g_failures) fprintf(stderr, "%d failure(s)\n", g_failures);
  return g_failures ? 1 : 0;
}
