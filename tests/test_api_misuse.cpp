// API misuse that llm.h defines: destroy with requests in flight, cancel of
// unknown or finished ids, poll with capacity 0, submit / cancel / poll from
// inside a token callback, a context used from threads that then exit. Each
// case has one defined outcome; under ASan this also checks nothing leaks.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "llm.h"
#include "support/api_helpers.h"

namespace llm::test {
namespace {

llm_ctx* Create(int32_t max_batch_tokens = 0) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  const std::string path = ModelPathF32();
  p.model_path = path.c_str();
  p.n_threads = 2;
  p.n_ctx = 128;
  p.max_batch_tokens = max_batch_tokens;
  llm_ctx* ctx = nullptr;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_OK) << llm_last_error();
  return ctx;
}

llm_request Greedy(const char* prompt, int32_t max_tokens, const llm_sampling_params* sp) {
  llm_request r;
  llm_request_init(&r);
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.sampling = sp;
  r.ignore_eos = 1;
  return r;
}

llm_sampling_params GreedyParams() {
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0;
  return sp;
}

// Polls until `pred` holds or `seconds` pass.
template <typename Pred>
bool PollUntil(llm_ctx* ctx, Pred pred, double seconds = 60) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!pred()) {
    if (std::chrono::steady_clock::now() - t0 > std::chrono::duration<double>(seconds)) return false;
    uint32_t n = 0;
    EXPECT_EQ(llm_poll(ctx, nullptr, 0, &n, 50), LLM_OK) << llm_last_error();
  }
  return true;
}

// Polls into an array, handing each event to `on_event` until it returns true
// or `seconds` pass.
template <typename F>
bool PollEvents(llm_ctx* ctx, F on_event, double seconds = 60) {
  const auto t0 = std::chrono::steady_clock::now();
  llm_event ev[8];
  while (std::chrono::steady_clock::now() - t0 < std::chrono::duration<double>(seconds)) {
    uint32_t n = 0;
    ev[0].struct_size = sizeof(llm_event);
    EXPECT_EQ(llm_poll(ctx, ev, 8, &n, 50), LLM_OK) << llm_last_error();
    for (uint32_t i = 0; i < n; ++i) {
      if (on_event(ev[i])) return true;
    }
  }
  return false;
}

// ------------------------------------------------- destroy with work in flight

TEST(ApiMisuse, DestroyWithRequestsInFlight) {
  // Queued, running (prefill and decode), finished-but-unpolled, and
  // callback requests: destroy cancels them all, drops their events, and
  // calls no callback (ASan/LSan: nothing leaks).
  std::atomic<int> callbacks{0};
  auto cb = [](const llm_event*, void* user) { static_cast<std::atomic<int>*>(user)->fetch_add(1); };
  for (int round = 0; round < 3; ++round) {
    llm_ctx* ctx = Create(round == 0 ? 1 : 0);
    ASSERT_NE(ctx, nullptr);
    llm_sampling_params sp = GreedyParams();
    for (int i = 0; i < 12; ++i) {
      llm_request r = Greedy(i % 2 ? "Once upon a time" : "The dog ran", 64, &sp);
      r.n = 1 + i % 3;
      if (i % 4 == 0) {
        r.callback = cb;
        r.user_data = &callbacks;
      }
      llm_request_id id;
      ASSERT_EQ(llm_submit(ctx, &r, &id), LLM_OK) << llm_last_error();
    }
    if (round == 2) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let some run
    const int before = callbacks.load();
    llm_ctx_destroy(ctx);
    EXPECT_EQ(callbacks.load(), before) << "destroy must not run callbacks";
  }
}

// ------------------------------------------------------------- cancel

TEST(ApiMisuse, CancelUnknownOrFinishedIds) {
  llm_ctx* ctx = Create();
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(llm_cancel(ctx, 0), LLM_ERR_NOT_FOUND);  // 0 is never an id
  EXPECT_STRNE(llm_last_error(), "");
  EXPECT_EQ(llm_cancel(ctx, 987654321), LLM_ERR_NOT_FOUND);
  EXPECT_EQ(llm_cancel(ctx, UINT64_MAX), LLM_ERR_NOT_FOUND);

  // Finished: NOT_FOUND once its final event has been polled.
  llm_sampling_params sp = GreedyParams();
  llm_request r = Greedy("Once upon a time", 4, &sp);
  llm_request_id id;
  ASSERT_EQ(llm_submit(ctx, &r, &id), LLM_OK);
  SeqResult res = WaitFor(ctx, id)[0];
  EXPECT_EQ(res.finish_reason, LLM_FINISH_LENGTH);
  EXPECT_EQ(llm_cancel(ctx, id), LLM_ERR_NOT_FOUND);

  // Cancelled twice while in flight: each call is OK or NOT_FOUND, and each
  // sequence still ends exactly once.
  r.max_tokens = 100;
  r.n = 2;
  ASSERT_EQ(llm_submit(ctx, &r, &id), LLM_OK);
  const llm_status a = llm_cancel(ctx, id);
  const llm_status b = llm_cancel(ctx, id);
  EXPECT_EQ(a, LLM_OK);
  EXPECT_TRUE(b == LLM_OK || b == LLM_ERR_NOT_FOUND) << llm_status_str(b);
  auto seqs = WaitFor(ctx, id, 2);
  for (const SeqResult& s : seqs) {
    EXPECT_EQ(s.n_final, 1);
    EXPECT_EQ(s.finish_reason, LLM_FINISH_CANCELLED);
  }
  EXPECT_EQ(llm_cancel(ctx, id), LLM_ERR_NOT_FOUND);
  // An id of another context is unknown here.
  llm_ctx* other = Create();
  ASSERT_EQ(llm_submit(other, &r, &id), LLM_OK);
  llm_request_id mine = 0;
  r.n = 1;
  ASSERT_EQ(llm_submit(ctx, &r, &mine), LLM_OK);
  (void)llm_cancel(ctx, mine);
  WaitFor(ctx, mine);
  EXPECT_EQ(llm_cancel(ctx, id + 1000), LLM_ERR_NOT_FOUND);
  llm_ctx_destroy(other);
  llm_ctx_destroy(ctx);
}

// ------------------------------------------------------- poll, capacity 0

TEST(ApiMisuse, PollWithCapacityZero) {
  llm_ctx* ctx = Create();
  ASSERT_NE(ctx, nullptr);
  llm_sampling_params sp = GreedyParams();
  llm_request r = Greedy("Once upon a time", 3, &sp);
  llm_request_id id;
  ASSERT_EQ(llm_submit(ctx, &r, &id), LLM_OK);
  // events == NULL with capacity 0 is allowed, and so is a non-NULL array
  // (nothing is read from or written to it). Events bound for the array stay
  // queued: nothing is dropped.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  uint32_t n = 99;
  ASSERT_EQ(llm_poll(ctx, nullptr, 0, &n, 0), LLM_OK);
  EXPECT_EQ(n, 0u);
  llm_event ev[4];
  ev[0].struct_size = 1;  // not read when capacity is 0
  n = 99;
  ASSERT_EQ(llm_poll(ctx, ev, 0, &n, 10), LLM_OK);
  EXPECT_EQ(n, 0u);
  SeqResult res = WaitFor(ctx, id)[0];
  EXPECT_EQ(res.tokens.size(), 3u);
  EXPECT_EQ(res.n_final, 1);
  llm_ctx_destroy(ctx);
}

// ------------------------------------------------ calls from a callback

struct CallbackState {
  llm_ctx* ctx = nullptr;
  llm_request_id self = 0;
  llm_request_id spawned = 0;
  llm_status submit_status = -1, cancel_status = -1, poll_status = -1, stats_status = -1;
  std::string poll_error;
  int self_tokens = 0, self_finals = 0, spawned_finals = 0;
  int32_t self_finish = LLM_FINISH_NONE, spawned_finish = LLM_FINISH_NONE;
  std::vector<llm_token> spawned_tokens;
};

void SpawnedCallback(const llm_event* e, void* user) {
  auto* s = static_cast<CallbackState*>(user);
  if (e->type == LLM_EVENT_TOKEN) s->spawned_tokens.push_back(e->token);
  if (e->type == LLM_EVENT_FINAL) {
    s->spawned_finals++;
    s->spawned_finish = e->finish_reason;
  }
}

void SelfCallback(const llm_event* e, void* user) {
  auto* s = static_cast<CallbackState*>(user);
  if (e->type == LLM_EVENT_FINAL) {
    s->self_finals++;
    s->self_finish = e->finish_reason;
    return;
  }
  if (s->self_tokens++ > 0) return;
  // First token: submit a follow-up, cancel ourselves, try to poll, read stats.
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0;
  llm_request r;
  llm_request_init(&r);
  r.prompt = "The little dog";
  r.max_tokens = 6;
  r.ignore_eos = 1;
  r.sampling = &sp;
  r.callback = SpawnedCallback;
  r.user_data = s;
  s->submit_status = llm_submit(s->ctx, &r, &s->spawned);
  s->cancel_status = llm_cancel(s->ctx, s->self);
  uint32_t n = 0;
  s->poll_status = llm_poll(s->ctx, nullptr, 0, &n, 0);
  s->poll_error = llm_last_error();
  llm_stats st{};
  st.struct_size = sizeof st;
  s->stats_status = llm_get_stats(s->ctx, &st);
}

TEST(ApiMisuse, SubmitCancelAndPollFromInsideACallback) {
  llm_ctx* ctx = Create();
  ASSERT_NE(ctx, nullptr);
  CallbackState s;
  s.ctx = ctx;
  llm_sampling_params sp = GreedyParams();
  llm_request r = Greedy("Once upon a time", 100, &sp);
  r.callback = SelfCallback;
  r.user_data = &s;
  ASSERT_EQ(llm_submit(ctx, &r, &s.self), LLM_OK);
  ASSERT_TRUE(PollUntil(ctx, [&] { return s.self_finals == 1 && s.spawned_finals == 1; }));
  EXPECT_EQ(s.submit_status, LLM_OK);
  EXPECT_NE(s.spawned, 0u);
  // The callback runs on the polling thread, behind the engine: by the first
  // token's event the engine may already have finished the request (its
  // events still queued), and then the cancel finds nothing to cancel.
  EXPECT_TRUE(s.cancel_status == LLM_OK || s.cancel_status == LLM_ERR_NOT_FOUND) << s.cancel_status;
  EXPECT_EQ(s.poll_status, LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.poll_error.find("callback"), std::string::npos) << s.poll_error;
  EXPECT_EQ(s.stats_status, LLM_OK);
  // The cancel takes effect at the engine's next step; on a fast or busy
  // machine the request may already have run to its end by then.
  if (s.cancel_status == LLM_ERR_NOT_FOUND) {
    EXPECT_EQ(s.self_finish, LLM_FINISH_LENGTH);
    EXPECT_EQ(s.self_tokens, 100);
  } else if (s.self_finish == LLM_FINISH_CANCELLED) {
    EXPECT_LT(s.self_tokens, 100);
  } else {
    EXPECT_EQ(s.self_finish, LLM_FINISH_LENGTH);
    EXPECT_EQ(s.self_tokens, 100);
  }
  EXPECT_EQ(s.spawned_finish, LLM_FINISH_LENGTH);
  // The follow-up ran as if submitted from outside.
  SeqResult solo = Generate(ctx, "The little dog", 6);
  EXPECT_EQ(s.spawned_tokens, solo.tokens);
  llm_ctx_destroy(ctx);
}

// ------------------------------------------------- threads that exit

TEST(ApiMisuse, ContextUsedFromThreadsThatExit) {
  // Created on one thread, fed by others that exit, polled and destroyed on
  // a third: no call depends on the thread that made the context.
  llm_ctx* ctx = nullptr;
  std::thread([&] { ctx = Create(); }).join();
  ASSERT_NE(ctx, nullptr);
  llm_sampling_params sp = GreedyParams();
  const SeqResult ref = Generate(ctx, "Once upon a time", 5);  // before: WaitFor drops other ids' events
  std::vector<llm_request_id> ids(4);
  std::vector<std::thread> submitters;
  for (int i = 0; i < 4; ++i) {
    submitters.emplace_back([&, i] {
      llm_request r = Greedy("Once upon a time", 5, &sp);
      ASSERT_EQ(llm_submit(ctx, &r, &ids[i]), LLM_OK) << llm_last_error();
    });
  }
  for (auto& t : submitters) t.join();
  // Collect all four from one polling loop (WaitFor drops other ids' events).
  std::vector<std::vector<llm_token>> got(4);
  int finals = 0;
  ASSERT_TRUE(PollEvents(ctx, [&](const llm_event& e) {
    for (int i = 0; i < 4; ++i) {
      if (e.request_id != ids[i]) continue;
      if (e.type == LLM_EVENT_TOKEN) got[i].push_back(e.token);
      if (e.type == LLM_EVENT_FINAL) ++finals;
    }
    return finals == 4;
  }));
  for (const auto& g : got) EXPECT_EQ(g, ref.tokens);

  // The last error is per thread: an error on a thread that then exits is not
  // seen by others, and a fresh thread starts with "".
  llm_request bad = Greedy("hi", 0, &sp);
  llm_request_id id;
  EXPECT_EQ(llm_submit(ctx, &bad, &id), LLM_ERR_INVALID_ARGUMENT);
  const std::string mine = llm_last_error();
  EXPECT_NE(mine.find("max_tokens"), std::string::npos);
  std::string other_error, fresh_error;
  std::thread([&] {
    fresh_error = llm_last_error();
    EXPECT_EQ(llm_cancel(ctx, 424242), LLM_ERR_NOT_FOUND);
    other_error = llm_last_error();
  }).join();
  EXPECT_EQ(fresh_error, "");
  EXPECT_NE(other_error.find("424242"), std::string::npos) << other_error;
  EXPECT_EQ(std::string(llm_last_error()), mine);

  // A thread that polls (and so runs callbacks) and exits mid-request: the
  // request goes on and the next poller gets the rest.
  llm_request r = Greedy("Once upon a time", 20, &sp);
  ASSERT_EQ(llm_submit(ctx, &r, &id), LLM_OK);
  std::thread([&] {
    uint32_t n;
    llm_event ev[2];
    ev[0].struct_size = sizeof(llm_event);
    EXPECT_EQ(llm_poll(ctx, ev, 2, &n, 100), LLM_OK);
  }).join();
  SeqResult rest = WaitFor(ctx, id)[0];
  EXPECT_EQ(rest.n_final, 1);
  std::thread([&] { llm_ctx_destroy(ctx); }).join();
}

}  // namespace
}  // namespace llm::test
