/* stream.c — the smallest complete llmrt program, in plain C.
 *
 * Creates a context (the built-in stories260K model unless a GGUF path is
 * given), submits one prompt, and streams the story through a token callback
 * that llm_poll runs on this thread. Prints the request's metrics at the end.
 *
 *   stream [MODEL.gguf] [PROMPT]
 */
#include <stdio.h>
#include <stdlib.h>

#include "llm.h"

typedef struct {
  int done;
  llm_metrics metrics;
  int finish_reason;
} stream_state;

static void on_event(const llm_event* ev, void* user_data) {
  stream_state* st = (stream_state*)user_data;
  fwrite(ev->text, 1, ev->text_len, stdout); /* whole UTF-8 characters only */
  fflush(stdout);
  if (ev->type == LLM_EVENT_FINAL) {
    st->done = 1;
    st->metrics = ev->metrics;
    st->finish_reason = ev->finish_reason;
    if (ev->status != LLM_OK) fprintf(stderr, "\nerror: %s\n", ev->message);
  }
}

static int check(llm_status s, const char* what) {
  if (s == LLM_OK) return 0;
  fprintf(stderr, "%s failed: %s: %s\n", what, llm_status_str(s), llm_last_error());
  return 1;
}

int main(int argc, char** argv) {
  llm_ctx_params params;
  llm_ctx_params_init(&params);
  params.model_path = argc > 1 ? argv[1] : NULL; /* NULL: built-in model */

  llm_ctx* ctx = NULL;
  if (check(llm_ctx_create(&params, &ctx), "llm_ctx_create")) return 1;

  llm_sampling_params sampling;
  llm_sampling_params_init(&sampling);
  sampling.temperature = 0.8f;
  sampling.seed = 42;

  stream_state st = {0};
  llm_request req;
  llm_request_init(&req);
  req.prompt = argc > 2 ? argv[2] : "Once upon a time";
  req.max_tokens = 256;
  req.sampling = &sampling;
  req.callback = on_event;
  req.user_data = &st;

  llm_request_id id;
  if (check(llm_submit(ctx, &req, &id), "llm_submit")) {
    llm_ctx_destroy(ctx);
    return 1;
  }
  fputs(req.prompt, stdout);
  while (!st.done) {
    uint32_t n = 0;
    /* capacity 0: this request's events all go to its callback */
    if (check(llm_poll(ctx, NULL, 0, &n, 1000), "llm_poll")) break;
  }
  fprintf(stderr,
          "\n\n[prompt %d tokens, generated %d, finish %d] TTFT %.2f ms, TPOT %.3f ms (%.0f tok/s)\n",
          st.metrics.prompt_tokens, st.metrics.generated_tokens, st.finish_reason, st.metrics.ttft_ms,
          st.metrics.tpot_ms, st.metrics.tpot_ms > 0 ? 1000.0 / st.metrics.tpot_ms : 0.0);
  llm_ctx_destroy(ctx);
  return 0;
}
