/* Links against an installed llmrt and generates a few tokens with the
 * built-in model: proves the installed headers, library and package files. */
#include <stdio.h>

#include "llm.h"

int main(void) {
  llm_ctx* ctx = NULL;
  if (llm_ctx_create(NULL, &ctx) != LLM_OK) {
    fprintf(stderr, "llm_ctx_create: %s\n", llm_last_error());
    return 1;
  }
  llm_request req;
  llm_request_init(&req);
  req.prompt = "Once upon a time";
  req.max_tokens = 8;
  llm_request_id id;
  if (llm_submit(ctx, &req, &id) != LLM_OK) return 1;
  int done = 0, tokens = 0;
  llm_event ev[8];
  while (!done) {
    uint32_t n = 0;
    ev[0].struct_size = sizeof(llm_event);
    if (llm_poll(ctx, ev, 8, &n, 1000) != LLM_OK) return 1;
    for (uint32_t i = 0; i < n; ++i) {
      if (ev[i].type == LLM_EVENT_TOKEN) tokens++;
      if (ev[i].type == LLM_EVENT_FINAL) done = 1;
    }
  }
  llm_ctx_destroy(ctx);
  printf("consumer: llmrt %s generated %d tokens\n", llm_version(), tokens);
  return tokens == 8 ? 0 : 1;
}
