/* chat.c — a small chat REPL in plain C over the model's chat template.
 *
 *   chat [MODEL.gguf]
 *
 * Each turn renders the whole conversation with llm_chat_apply_template
 * (the model's own template; a plain fallback for models without one, such
 * as the built-in stories260K), submits it as raw text (the template already
 * holds the special tokens), and streams the reply through a callback.
 * Commands: /reset clears the history, /quit (or end of input) leaves.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm.h"

#define MAX_TURNS 64

static const char* kFallbackTemplate =
    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}";

typedef struct {
  char* reply;
  size_t len, cap;
  int done;
} turn_state;

static void on_event(const llm_event* ev, void* user) {
  turn_state* t = (turn_state*)user;
  fwrite(ev->text, 1, ev->text_len, stdout);
  fflush(stdout);
  if (t->len + ev->text_len + 1 > t->cap) {
    size_t cap = (t->cap + ev->text_len + 1) * 2;
    char* p = (char*)realloc(t->reply, cap);
    if (!p) return;
    t->reply = p;
    t->cap = cap;
  }
  memcpy(t->reply + t->len, ev->text, ev->text_len);
  t->len += ev->text_len;
  t->reply[t->len] = '\0';
  if (ev->type == LLM_EVENT_FINAL) t->done = 1;
}

static char* dup_str(const char* s) {
  size_t n = strlen(s) + 1;
  char* p = (char*)malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

int main(int argc, char** argv) {
  llm_ctx_params params;
  llm_ctx_params_init(&params);
  params.model_path = argc > 1 ? argv[1] : NULL;
  llm_ctx* ctx = NULL;
  if (llm_ctx_create(&params, &ctx) != LLM_OK) {
    fprintf(stderr, "llm_ctx_create: %s\n", llm_last_error());
    return 1;
  }
  /* Does the model carry a template? */
  const char* tmpl = NULL;
  llm_chat_message probe = {"user", "hi"};
  size_t need = 0;
  if (llm_chat_apply_template(ctx, NULL, &probe, 1, 1, NULL, 0, &need) == LLM_ERR_UNSUPPORTED) {
    tmpl = kFallbackTemplate;
    fprintf(stderr, "(this model has no chat template; using a plain one)\n");
  }

  llm_chat_message history[MAX_TURNS];
  size_t n = 0;
  char line[4096];
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0.7f;
  for (;;) {
    printf("> ");
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) break;
    line[strcspn(line, "\r\n")] = '\0';
    if (strcmp(line, "/quit") == 0) break;
    if (strcmp(line, "/reset") == 0 || n + 2 > MAX_TURNS) {
      for (size_t i = 0; i < n; ++i) free((char*)history[i].content);
      n = 0;
      if (line[0] == '/') continue;
    }
    if (line[0] == '\0') continue;
    history[n].role = "user";
    history[n].content = dup_str(line);
    ++n;

    size_t len = 0;
    llm_status s = llm_chat_apply_template(ctx, tmpl, history, n, 1, NULL, 0, &len);
    if (s != LLM_OK && s != LLM_ERR_BUFFER_TOO_SMALL) {
      fprintf(stderr, "template: %s\n", llm_last_error());
      break;
    }
    char* prompt = (char*)malloc(len + 1);
    if (!prompt || llm_chat_apply_template(ctx, tmpl, history, n, 1, prompt, len, &len) != LLM_OK) {
      fprintf(stderr, "template: %s\n", llm_last_error());
      free(prompt);
      break;
    }
    prompt[len] = '\0';

    turn_state t = {0};
    const char* stops[] = {"\nuser:"};
    llm_request req;
    llm_request_init(&req);
    req.prompt = prompt;
    req.tokenize_flags = LLM_TOKENIZE_ADD_SPECIAL | LLM_TOKENIZE_PARSE_SPECIAL;
    req.max_tokens = 256;
    req.sampling = &sp;
    req.stop = tmpl ? stops : NULL;
    req.n_stop = tmpl ? 1 : 0;
    req.callback = on_event;
    req.user_data = &t;
    llm_request_id id;
    s = llm_submit(ctx, &req, &id);
    free(prompt);
    if (s != LLM_OK) {
      fprintf(stderr, "submit: %s\n", llm_last_error());
      free(t.reply);
      --n;
      free((char*)history[n].content);
      continue;
    }
    while (!t.done) {
      uint32_t got = 0;
      if (llm_poll(ctx, NULL, 0, &got, 1000) != LLM_OK) break;
    }
    printf("\n");
    history[n].role = "assistant";
    history[n].content = t.reply ? t.reply : dup_str("");
    ++n;
  }
  for (size_t i = 0; i < n; ++i) free((char*)history[i].content);
  llm_ctx_destroy(ctx);
  return 0;
}
