/* The C API driven from C (compiled as C11): 8 concurrent requests with
 * different sampling settings submitted from 2 threads, one cancelled
 * mid-generation, one streamed through a callback, and a blocking poll
 * interrupted by llm_wakeup. Every event stream must be well formed: token
 * events, then exactly one final event per sequence, nothing after it.
 * Then logit_bias, min_tokens, stop_token_ids and top_logprobs. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llm.h"

#define N_REQ 8
#define MAX_TOKENS 120

static int g_failures = 0;
#define CHECK(cond)                                                     \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      g_failures++;                                                     \
    }                                                                   \
  } while (0)
#define CHECK_OK(expr)                                                  \
  do {                                                                  \
    llm_status s_ = (expr);                                             \
    if (s_ != LLM_OK) {                                                 \
      fprintf(stderr, "%s:%d: %s -> %s (%s)\n", __FILE__, __LINE__, #expr, llm_status_str(s_), llm_last_error()); \
      g_failures++;                                                     \
    }                                                                   \
  } while (0)

typedef struct {
  llm_request_id id;
  int n_tokens;      /* token events seen */
  int n_final;       /* final events seen */
  int finish_reason;
  int generated;     /* metrics.generated_tokens */
  int via_callback;
  char text[8192];
  size_t text_len;
  llm_token tokens[MAX_TOKENS + 8];
} req_track;

static llm_ctx* g_ctx;
static req_track g_req[N_REQ];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t g_poll_thread;
static int g_callback_wrong_thread = 0;

static req_track* find(llm_request_id id) {
  for (int i = 0; i < N_REQ; ++i)
    if (g_req[i].id == id) return &g_req[i];
  return NULL;
}

static void record(const llm_event* ev) {
  pthread_mutex_lock(&g_mu);
  req_track* t = find(ev->request_id);
  pthread_mutex_unlock(&g_mu);
  CHECK(t != NULL);
  if (!t) return;
  CHECK(ev->seq_index == 0);
  CHECK(t->n_final == 0); /* nothing after the final event */
  CHECK(ev->text != NULL);
  CHECK(strlen(ev->text) == ev->text_len);
  if (t->text_len + ev->text_len < sizeof t->text) {
    memcpy(t->text + t->text_len, ev->text, ev->text_len);
    t->text_len += ev->text_len;
  }
  if (ev->type == LLM_EVENT_TOKEN) {
    CHECK(ev->finish_reason == LLM_FINISH_NONE);
    CHECK(ev->logprob <= 0.0f);
    if (t->n_tokens < MAX_TOKENS + 8) t->tokens[t->n_tokens] = ev->token;
    t->n_tokens++;
  } else {
    CHECK(ev->type == LLM_EVENT_FINAL);
    CHECK(ev->message != NULL);
    t->n_final++;
    t->finish_reason = ev->finish_reason;
    t->generated = ev->metrics.generated_tokens;
    CHECK(ev->metrics.prompt_tokens > 0);
  }
}

static void on_event(const llm_event* ev, void* user) {
  (void)user;
  if (!pthread_equal(pthread_self(), g_poll_thread)) g_callback_wrong_thread = 1;
  record(ev);
}

typedef struct {
  int first; /* submits requests first .. first+3 */
} submit_arg;

static void* submitter(void* p) {
  submit_arg* a = (submit_arg*)p;
  static const char* prompts[] = {"Once upon a time", "The little dog", "Lily wanted to", "The sun was"};
  for (int k = 0; k < 4; ++k) {
    int i = a->first + k;
    llm_sampling_params sp;
    llm_sampling_params_init(&sp);
    sp.temperature = (float)(i % 4) * 0.4f; /* 0 (greedy), 0.4, 0.8, 1.2 */
    sp.top_k = (i % 3) * 20;                /* 0 = off, 20, 40 */
    sp.top_p = i % 2 ? 0.9f : 1.0f;
    sp.min_p = i % 2 ? 0.0f : 0.05f;
    sp.repetition_penalty = i == 5 ? 1.1f : 1.0f;
    sp.presence_penalty = i == 6 ? 0.5f : 0.0f;
    sp.seed = 1000 + (uint64_t)i;
    llm_request r;
    llm_request_init(&r);
    r.prompt = prompts[i % 4];
    r.max_tokens = MAX_TOKENS;
    r.ignore_eos = 1;
    r.sampling = &sp;
    if (i == 3) { /* one request streams through a callback */
      r.callback = on_event;
      g_req[i].via_callback = 1;
    }
    /* Hold the lock across submit so the id is recorded before any event. */
    pthread_mutex_lock(&g_mu);
    llm_request_id id = 0;
    llm_status s = llm_submit(g_ctx, &r, &id);
    if (s == LLM_OK) g_req[i].id = id;
    pthread_mutex_unlock(&g_mu);
    CHECK_OK(s);
    CHECK(id != 0);
  }
  return NULL;
}

static void* waker(void* p) {
  (void)p;
  struct timespec ts = {0, 100 * 1000 * 1000};
  nanosleep(&ts, NULL);
  CHECK_OK(llm_wakeup(g_ctx));
  return NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Runs one request to its end, polling with the full event size; returns
 * the number of tokens (into toks) and checks each token event's
 * top_logprobs against `k`. */
static int run_options_request(const llm_request* r, int k, llm_token* toks, int cap, int* finish) {
  llm_request_id id = 0;
  CHECK_OK(llm_submit(g_ctx, r, &id));
  if (id == 0) return 0;
  int n_tok = 0;
  double t0 = now_s();
  while (now_s() - t0 < 60.0) {
    llm_event ev[8];
    uint32_t n = 0;
    ev[0].struct_size = sizeof(llm_event);
    CHECK_OK(llm_poll(g_ctx, ev, 8, &n, 100));
    for (uint32_t i = 0; i < n; ++i) {
      if (ev[i].request_id != id) continue;
      if (ev[i].type == LLM_EVENT_FINAL) {
        *finish = ev[i].finish_reason;
        return n_tok;
      }
      CHECK(ev[i].n_top_logprobs == k);
      CHECK((ev[i].top_logprobs != NULL) == (k > 0));
      for (int j = 1; j < ev[i].n_top_logprobs; ++j)
        CHECK(ev[i].top_logprobs[j].logprob <= ev[i].top_logprobs[j - 1].logprob);
      if (k > 0 && r->sampling->temperature == 0.0f) {
        CHECK(ev[i].top_logprobs[0].token == ev[i].token);
        CHECK(ev[i].top_logprobs[0].logprob == ev[i].logprob);
      }
      if (n_tok < cap) toks[n_tok] = ev[i].token;
      n_tok++;
    }
  }
  CHECK(0 && "no final event");
  return n_tok;
}

/* logit_bias, stop_token_ids, min_tokens and top_logprobs from C (issue 20). */
static void sampling_options_from_c(void) {
  llm_model_info info;
  info.struct_size = sizeof info;
  CHECK_OK(llm_model_get_info(g_ctx, &info));
  llm_sampling_params sp;
  CHECK_OK(llm_sampling_params_init(&sp));
  CHECK(sp.logit_bias == NULL && sp.n_logit_bias == 0);
  sp.temperature = 0.0f;
  llm_request r;
  CHECK_OK(llm_request_init(&r));
  CHECK(r.stop_token_ids == NULL && r.min_tokens == 0 && r.top_logprobs == 0);
  r.prompt = "Once upon a time";
  r.max_tokens = 12;
  r.sampling = &sp;
  r.top_logprobs = 3;
  llm_token plain[16], other[16];
  int finish = 0;
  CHECK(run_options_request(&r, 3, plain, 16, &finish) == 12);

  /* Ban the first greedy token: it never appears. */
  llm_logit_bias ban = {plain[0], -INFINITY};
  sp.logit_bias = &ban;
  sp.n_logit_bias = 1;
  r.top_logprobs = 0;
  int n = run_options_request(&r, 0, other, 16, &finish);
  CHECK(n == 12);
  for (int i = 0; i < n && i < 16; ++i) CHECK(other[i] != plain[0]);

  /* EOS pushed up by +100 but held back by min_tokens = 4. */
  llm_logit_bias eos = {info.eos, 100.0f};
  sp.logit_bias = &eos;
  r.min_tokens = 4;
  n = run_options_request(&r, 0, other, 16, &finish);
  CHECK(n == 5 && other[4] == info.eos && finish == LLM_FINISH_STOP);

  /* A stop token id ends the sequence at its first occurrence. */
  sp.n_logit_bias = 0;
  sp.logit_bias = NULL;
  r.min_tokens = 0;
  r.stop_token_ids = &plain[5];
  r.n_stop_token_ids = 1;
  n = run_options_request(&r, 0, other, 16, &finish);
  CHECK(n >= 1 && n <= 6 && other[n - 1] == plain[5] && finish == LLM_FINISH_STOP);

  /* Bad values: a status and a message, no request. */
  llm_request_id id = 0;
  llm_logit_bias nan_bias = {1, NAN};
  sp.logit_bias = &nan_bias;
  sp.n_logit_bias = 1;
  r.stop_token_ids = NULL;
  r.n_stop_token_ids = 0;
  CHECK(llm_submit(g_ctx, &r, &id) == LLM_ERR_INVALID_ARGUMENT && id == 0 && strlen(llm_last_error()) > 0);
  sp.n_logit_bias = 0;
  r.top_logprobs = 21;
  CHECK(llm_submit(g_ctx, &r, &id) == LLM_ERR_INVALID_ARGUMENT && id == 0);
}

int main(void) {
  g_poll_thread = pthread_self();
  llm_ctx_params p;
  CHECK_OK(llm_ctx_params_init(&p));
  p.model_path = "models/stories260K-f32.gguf";
  p.n_threads = 2;
  p.max_batch_tokens = 16; /* small budget: prompts prefill in chunks beside decodes */
  CHECK_OK(llm_ctx_create(&p, &g_ctx));
  if (!g_ctx) return 1;

  pthread_t t1, t2;
  submit_arg a1 = {0}, a2 = {4};
  pthread_create(&t1, NULL, submitter, &a1);
  pthread_create(&t2, NULL, submitter, &a2);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);

  const int cancel_idx = 6;
  int cancelled = 0, finals = 0;
  llm_event ev[4]; /* small on purpose: events arrive over many polls */
  double t0 = now_s();
  while (finals < N_REQ && now_s() - t0 < 60.0) {
    uint32_t n = 0;
    ev[0].struct_size = sizeof(llm_event);
    CHECK_OK(llm_poll(g_ctx, ev, 4, &n, 1000));
    for (uint32_t k = 0; k < n; ++k) {
      CHECK(ev[k].struct_size == sizeof(llm_event));
      record(&ev[k]);
    }
    if (!cancelled && g_req[cancel_idx].n_tokens >= 5) {
      CHECK_OK(llm_cancel(g_ctx, g_req[cancel_idx].id));
      cancelled = 1;
    }
    finals = 0;
    for (int i = 0; i < N_REQ; ++i) finals += g_req[i].n_final;
  }
  CHECK(cancelled);
  CHECK(finals == N_REQ);
  for (int i = 0; i < N_REQ; ++i) {
    req_track* t = &g_req[i];
    CHECK(t->n_final == 1);
    CHECK(t->n_tokens == t->generated);
    if (i == cancel_idx) {
      CHECK(t->finish_reason == LLM_FINISH_CANCELLED);
      CHECK(t->n_tokens < MAX_TOKENS);
    } else {
      CHECK(t->finish_reason == LLM_FINISH_LENGTH);
      CHECK(t->n_tokens == MAX_TOKENS);
    }
    /* The streamed text equals the detokenized ids. */
    char buf[8192];
    size_t len = 0;
    CHECK_OK(llm_detokenize(g_ctx, t->tokens, t->n_tokens, 0, buf, sizeof buf, &len));
    CHECK(len == t->text_len && memcmp(buf, t->text, len) == 0);
  }
  CHECK(!g_callback_wrong_thread);
  CHECK(llm_cancel(g_ctx, g_req[0].id) == LLM_ERR_NOT_FOUND); /* finished */

  /* A blocking poll (no timeout) returns when another thread wakes it. */
  pthread_t tw;
  pthread_create(&tw, NULL, waker, NULL);
  double w0 = now_s();
  uint32_t n = 99;
  ev[0].struct_size = sizeof(llm_event);
  CHECK_OK(llm_poll(g_ctx, ev, 4, &n, -1));
  double waited = now_s() - w0;
  pthread_join(tw, NULL);
  CHECK(n == 0);
  CHECK(waited >= 0.05 && waited < 10.0);

  llm_stats st;
  st.struct_size = sizeof st;
  CHECK_OK(llm_get_stats(g_ctx, &st));
  CHECK(st.requests_submitted == N_REQ);
  CHECK(st.requests_finished == N_REQ);
  CHECK(st.kv_blocks_used == 0);

  /* A CPU context uses no device: index 0 is NOT_FOUND, n_devices 0; a
     CUDA one (AUTO on a GPU machine) reports its devices' weights. */
  llm_device_stats ds;
  ds.struct_size = sizeof ds;
  ds.n_devices = 7;
  if (st.backend == LLM_BACKEND_CPU) {
    CHECK(llm_get_device_stats(g_ctx, 0, &ds) == LLM_ERR_NOT_FOUND);
    CHECK(ds.n_devices == 0 && ds.weight_bytes == 0);
  } else {
    CHECK_OK(llm_get_device_stats(g_ctx, 0, &ds));
    CHECK(ds.n_devices >= 1 && ds.weight_bytes > 0);
    CHECK(llm_get_device_stats(g_ctx, ds.n_devices, &ds) == LLM_ERR_NOT_FOUND);
  }
  ds.struct_size = 8;
  CHECK(llm_get_device_stats(g_ctx, 0, &ds) == LLM_ERR_STRUCT_SIZE);
  CHECK(llm_get_device_stats(g_ctx, 0, NULL) == LLM_ERR_NULL_ARGUMENT);

  sampling_options_from_c();

  llm_ctx_destroy(g_ctx);
  llm_ctx_destroy(NULL); /* no-op */
  if (g_failures) {
    fprintf(stderr, "0 passed, 1 failed (%d checks)\n", g_failures);
    return 1;
  }
  printf("ctest_api: all checks passed\n");
  return 0;
}
