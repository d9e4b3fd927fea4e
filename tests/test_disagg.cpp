// Prefill/decode disaggregation (docs/DISAGG.md; src/disagg/, capi_disagg):
// the descriptor and wire parsers, the lease table, and — when this build
// has UCX — a producer context and a consumer context over loopback whose
// greedy outputs equal one context's, and each failure the consumer must
// survive by computing the prompt itself: producer gone, lease expired,
// another model, flipped bytes, a producer dying mid-transfer. Every case
// ends with both pools back at their idle block counts. With a CUDA device
// (or the emulator of -DLLM_CUDA=EMULATE) the roles across backends: a CPU
// producer and a CUDA consumer, a CUDA producer and a CPU consumer.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "disagg/descriptor.h"
#include "disagg/lease_table.h"
#include "disagg/transport.h"
#include "disagg/wire.h"
#include "llm.h"
#include "support/api_greedy.h"
#include "support/api_helpers.h"
#include "support/cuda_test_helpers.h"
#include "synth_model.h"

namespace llm {
namespace {

using namespace std::chrono_literals;

// Loopback over TCP on any machine, for every test here (before any UCX
// context is made).
const bool kUcxTls = [] { return setenv("UCX_TLS", "tcp", 0) == 0; }();

// ---------------------------------------------------------------- parsers

TEST(DisaggDescriptor, RoundTrips) {
  disagg::TransferDescriptor d{"127.0.0.1", 4242, 0x0123456789abcdefull, 7, 0xffffffffffffffffull, 48, 123456};
  const std::string s = disagg::FormatDescriptor(d);
  EXPECT_EQ(s, "llmkv1 addr=127.0.0.1:4242 lease=0123456789abcdef model=0000000000000007 geom=ffffffffffffffff "
               "tokens=48 bytes=123456");
  StatusOr<disagg::TransferDescriptor> back = disagg::ParseDescriptor(s);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, d);
}

TEST(DisaggDescriptor, RefusesWhatDoesNotParse) {
  const std::string good = "llmkv1 addr=h.example:1 lease=0123456789abcdef model=0000000000000007 "
                           "geom=ffffffffffffffff tokens=48 bytes=1";
  ASSERT_TRUE(disagg::ParseDescriptor(good).ok());
  for (const std::string& bad : std::vector<std::string>{
           std::string(""), std::string("llmkv2 addr=h:1"), good + " ", good + "x", good + "\n",
           std::string("llmkv1 addr=h:0 lease=0123456789abcdef model=0000000000000007 geom=ffffffffffffffff tokens=48 bytes=1"),
           std::string("llmkv1 addr=h:65536 lease=0123456789abcdef model=0000000000000007 geom=ffffffffffffffff tokens=48 bytes=1"),
           std::string("llmkv1 addr=h_x:1 lease=0123456789abcdef model=0000000000000007 geom=ffffffffffffffff tokens=48 bytes=1"),
           std::string("llmkv1 addr=:1 lease=0123456789abcdef model=0000000000000007 geom=ffffffffffffffff tokens=48 bytes=1"),
           std::string("llmkv1 addr=h:1 lease=0123456789ABCDEF model=0000000000000007 geom=ffffffffffffffff tokens=48 bytes=1"),
           std::string("llmkv1 addr=h:1 lease=0123456789abcde model=0000000000000007 geom=ffffffffffffffff tokens=48 bytes=1"),
           std::string("llmkv1 addr=h:1 lease=0123456789abcdef model=0000000000000007 geom=ffffffffffffffff tokens=0 bytes=1"),
           std::string("llmkv1 addr=h:1 lease=0123456789abcdef model=0000000000000007 geom=ffffffffffffffff tokens=048 bytes=1"),
           std::string("llmkv1 addr=h:1 lease=0123456789abcdef model=0000000000000007 geom=ffffffffffffffff tokens=48 bytes=99999999999999999999"),
           std::string("llmkv1 addr=h:1 lease=0123456789abcdef model=0000000000000007 geom=ffffffffffffffff tokens=48  bytes=1"),
           std::string(600, 'x')}) {
    StatusOr<disagg::TransferDescriptor> d = disagg::ParseDescriptor(bad);
    EXPECT_FALSE(d.ok()) << bad;
    if (!d.ok()) {
      EXPECT_EQ(d.status().code(), LLM_ERR_INVALID_ARGUMENT) << bad;
    }
  }
}

TEST(DisaggWire, RequestsAndRepliesRoundTripAndRefuseGarbage) {
  disagg::Request hello;
  hello.type = disagg::MsgType::kHello;
  hello.lease = 99;
  hello.model_digest = 1;
  hello.geometry_digest = 2;
  hello.format_version = 1;
  hello.protocol_version = 1;
  uint8_t buf[disagg::kRequestBytes];
  disagg::EncodeRequest(hello, buf);
  StatusOr<disagg::Request> r = disagg::DecodeRequest({buf, sizeof buf});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->lease, 99u);
  EXPECT_EQ(r->model_digest, 1u);
  EXPECT_EQ(r->geometry_digest, 2u);
  buf[0] ^= 1;  // magic
  EXPECT_EQ(disagg::DecodeRequest({buf, sizeof buf}).status().code(), LLM_ERR_KV_CORRUPT);
  buf[0] ^= 1;
  buf[4] = 9;  // type
  EXPECT_EQ(disagg::DecodeRequest({buf, sizeof buf}).status().code(), LLM_ERR_KV_CORRUPT);
  EXPECT_FALSE(disagg::DecodeRequest({buf, 10}).ok());

  disagg::Reply pull;
  pull.type = disagg::MsgType::kPull;
  pull.offset = 4096;
  pull.length = 100;
  pull.checksum = 5;
  uint8_t rb[disagg::kReplyBytes];
  disagg::EncodeReply(pull, rb);
  StatusOr<disagg::Reply> p = disagg::DecodeReply({rb, sizeof rb});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->offset, 4096u);
  EXPECT_EQ(p->length, 100u);
  EXPECT_EQ(p->checksum, 5u);
  rb[8] = 77;  // code
  EXPECT_EQ(disagg::DecodeReply({rb, sizeof rb}).status().code(), LLM_ERR_KV_CORRUPT);
}

TEST(DisaggLease, ExtendsExpiresAndReleases) {
  disagg::LeaseTable t(400ms);
  const uint64_t a = t.Add(std::vector<uint8_t>(10, 1), 16);
  const uint64_t b = t.Add(std::vector<uint8_t>(20, 2), 32);
  EXPECT_NE(a, b);
  EXPECT_EQ(t.counters().active, 2);
  EXPECT_EQ(t.counters().bytes_held, 30u);
  for (int i = 0; i < 6; ++i) {  // extended every 100 ms: outlives its 400 ms
    std::this_thread::sleep_for(100ms);
    ASSERT_NE(t.FindAndExtend(a).bytes, nullptr) << i;
  }
  EXPECT_EQ(t.FindAndExtend(b).bytes, nullptr);  // b was never extended
  EXPECT_EQ(t.counters().expired, 1u);
  t.Release(a, true);
  EXPECT_EQ(t.FindAndExtend(a).bytes, nullptr);
  const disagg::LeaseCounters c = t.counters();
  EXPECT_EQ(c.served, 1u);
  EXPECT_EQ(c.active, 0);
  EXPECT_EQ(c.bytes_held, 0u);
}

// ---------------------------------------------------------------- contexts

struct GenRun {
  std::vector<llm_token> tokens;
  llm_status status = LLM_OK;
  std::string desc;
  int32_t transferred = 0;
  int32_t cached = 0;
  llm_status xfer_status = LLM_OK;
  bool done = false;
};

// Greedy tokens after `prompt` (EOS ignored).
GenRun Generate(llm_ctx* ctx, const std::vector<llm_token>& prompt, int n, const char* desc = nullptr,
             int32_t produce = 0) {
  GenRun run;
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0.0f;
  llm_request r;
  llm_request_init(&r);
  r.prompt_tokens = prompt.data();
  r.n_prompt_tokens = static_cast<int32_t>(prompt.size());
  r.max_tokens = n;
  r.ignore_eos = 1;
  r.sampling = &sp;
  r.kv_transfer_desc = desc;
  r.kv_produce = produce;
  r.user_data = &run;
  r.callback = [](const llm_event* e, void* u) {
    GenRun* out = static_cast<GenRun*>(u);
    if (e->type == LLM_EVENT_TOKEN) out->tokens.push_back(e->token);
    if (e->type == LLM_EVENT_FINAL) {
      out->status = e->status;
      out->desc = e->kv_transfer_desc != nullptr ? e->kv_transfer_desc : "";
      out->transferred = e->transferred_prompt_tokens;
      out->cached = e->metrics.cached_prompt_tokens;
      out->xfer_status = e->kv_transfer_status;
      out->done = true;
    }
  };
  llm_request_id id = 0;
  run.status = llm_submit(ctx, &r, &id);
  if (run.status != LLM_OK) return run;
  // One caller per context here: the callbacks run inside this thread's polls.
  const auto deadline = std::chrono::steady_clock::now() + 2min;
  while (!run.done) {
    llm_event ev[16];
    uint32_t n_ev = 0;
    for (llm_event& e : ev) e.struct_size = sizeof e;
    if (llm_poll(ctx, ev, 16, &n_ev, 200) != LLM_OK) {
      ADD_FAILURE() << llm_last_error();
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "no final event within 2 minutes";
      break;
    }
  }
  return run;
}

std::vector<llm_token> Prompt(int n, int salt = 0) {
  std::vector<llm_token> p{1};
  for (int i = 1; i < n; ++i) p.push_back((7 * i + 11 + 13 * salt) % 250 + 3);
  return p;
}

llm_ctx* MakeCtx(int32_t role, const char* model = nullptr, int32_t lease_ms = 0) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = model;
  p.backend = LLM_BACKEND_CPU;
  p.n_threads = 1;
  p.kv_role = role;
  p.kv_lease_ms = lease_ms;
  llm_ctx* ctx = nullptr;
  if (llm_ctx_create(&p, &ctx) != LLM_OK) {
    ADD_FAILURE() << llm_last_error();
    return nullptr;
  }
  return ctx;
}

llm_stats Stats(llm_ctx* ctx) {
  llm_stats s{};
  s.struct_size = sizeof s;
  EXPECT_EQ(llm_get_stats(ctx, &s), LLM_OK);
  return s;
}

// The producer counts a transfer when its DONE arrives, a moment after the
// consumer has sent it: waits (up to 5 s) for `pred` on its stats.
template <typename Pred>
llm_stats WaitStats(llm_ctx* ctx, Pred pred) {
  llm_stats s = Stats(ctx);
  for (int i = 0; i < 500 && !pred(s); ++i) {
    std::this_thread::sleep_for(10ms);
    s = Stats(ctx);
  }
  return s;
}

// Both pools idle: no block held by a sequence.
void ExpectIdle(llm_ctx* ctx) {
  const llm_stats s = Stats(ctx);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

class Disagg : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!disagg::TransportAvailable()) GTEST_SKIP() << "built without UCX (-DLLM_UCX)";
    ASSERT_TRUE(kUcxTls);
  }
};

TEST(DisaggRoles, RefusedWithoutTransportOrRole) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.backend = LLM_BACKEND_CPU;
  p.kv_role = 7;
  llm_ctx* ctx = nullptr;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_INVALID_ARGUMENT);
  p.kv_role = LLM_KV_ROLE_PRODUCER;
  const llm_status st = llm_ctx_create(&p, &ctx);
  if (!disagg::TransportAvailable()) {
    EXPECT_EQ(st, LLM_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(llm_last_error()).find("UCX"), std::string::npos) << llm_last_error();
  } else {
    EXPECT_EQ(st, LLM_OK) << llm_last_error();
    llm_ctx_destroy(ctx);
  }
  // A context without a role refuses both request fields.
  llm_ctx* plain = MakeCtx(LLM_KV_ROLE_NONE);
  ASSERT_NE(plain, nullptr);
  const std::vector<llm_token> prompt = Prompt(20);
  EXPECT_EQ(Generate(plain, prompt, 2, nullptr, 1).status, LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Generate(plain, prompt, 2, "llmkv1 x").status, LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Generate(plain, prompt, 2, nullptr, 2).status, LLM_ERR_INVALID_ARGUMENT);
  llm_ctx_destroy(plain);
}

TEST_F(Disagg, ConsumerDecodesLikeOneContext) {
  llm_ctx* single = MakeCtx(LLM_KV_ROLE_NONE);
  llm_ctx* prod = MakeCtx(LLM_KV_ROLE_PRODUCER);
  llm_ctx* cons = MakeCtx(LLM_KV_ROLE_CONSUMER);
  ASSERT_TRUE(single && prod && cons);
  for (int len : {40, 48, 100}) {
    const std::vector<llm_token> prompt = Prompt(len, len);
    const GenRun want = Generate(single, prompt, 24);
    ASSERT_EQ(want.status, LLM_OK);
    const GenRun pre = Generate(prod, prompt, 1, nullptr, 1);
    ASSERT_EQ(pre.status, LLM_OK);
    ASSERT_FALSE(pre.desc.empty());
    EXPECT_NE(pre.desc.find(" tokens=" + std::to_string(len / 16 * 16) + " "), std::string::npos) << pre.desc;
    const GenRun got = Generate(cons, prompt, 24, pre.desc.c_str());
    ASSERT_EQ(got.status, LLM_OK);
    EXPECT_EQ(got.xfer_status, LLM_OK);
    EXPECT_EQ(got.tokens, want.tokens) << "prompt of " << len;
    // Every full block arrived (a prompt of whole blocks computes its last
    // token again: the engine needs its logits).
    EXPECT_EQ(got.transferred, got.cached);
    EXPECT_GE(got.transferred, (len - 1) / 16 * 16) << len;
  }
  const llm_stats cs = Stats(cons);
  const llm_stats ps = WaitStats(prod, [](const llm_stats& s) { return s.kv_xfer_served == 3; });
  EXPECT_EQ(cs.kv_xfer_pulls, 3u);
  EXPECT_EQ(cs.kv_xfer_fallbacks, 0u);
  EXPECT_GT(cs.kv_xfer_bytes, 0u);
  EXPECT_EQ(ps.kv_xfer_served, 3u);
  EXPECT_EQ(ps.kv_xfer_bytes_served, cs.kv_xfer_bytes);
  EXPECT_EQ(ps.kv_leases_active, 0);
  EXPECT_EQ(ps.kv_lease_bytes, 0u);
  EXPECT_EQ(cs.kv_role, LLM_KV_ROLE_CONSUMER);
  ExpectIdle(prod);
  ExpectIdle(cons);
  llm_ctx_destroy(single);
  llm_ctx_destroy(prod);
  llm_ctx_destroy(cons);
}

TEST_F(Disagg, ConcurrentRequests) {
  llm_ctx* single = MakeCtx(LLM_KV_ROLE_NONE);
  llm_ctx* prod = MakeCtx(LLM_KV_ROLE_PRODUCER);
  ASSERT_TRUE(single && prod);
  constexpr int kN = 8;
  std::vector<std::vector<llm_token>> prompts;
  std::vector<GenRun> want, pre;
  for (int i = 0; i < kN; ++i) {
    prompts.push_back(Prompt(33 + 5 * i, i));
    want.push_back(Generate(single, prompts[i], 12));
    pre.push_back(Generate(prod, prompts[i], 1, nullptr, 1));
    ASSERT_FALSE(pre[i].desc.empty());
  }
  // kN consumer contexts pulling at once from the one producer.
  std::vector<GenRun> got(kN);
  std::vector<std::thread> threads;
  for (int i = 0; i < kN; ++i) {
    threads.emplace_back([&, i] {
      llm_ctx* cons = MakeCtx(LLM_KV_ROLE_CONSUMER);
      if (cons == nullptr) return;
      got[i] = Generate(cons, prompts[i], 12, pre[i].desc.c_str());
      ExpectIdle(cons);
      llm_ctx_destroy(cons);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(got[i].xfer_status, LLM_OK) << i;
    EXPECT_GT(got[i].transferred, 0) << i;
    EXPECT_EQ(got[i].tokens, want[i].tokens) << i;
  }
  EXPECT_EQ(WaitStats(prod, [](const llm_stats& s) { return s.kv_xfer_served == uint64_t(kN); }).kv_xfer_served,
            uint64_t(kN));
  EXPECT_EQ(Stats(prod).kv_leases_active, 0);
  llm_ctx_destroy(single);
  llm_ctx_destroy(prod);
}

// A failed transfer: logged, counted, the prompt computed, the same output.
void ExpectFallback(llm_ctx* cons, const std::vector<llm_token>& prompt, const GenRun& want, const std::string& desc,
                    llm_status why) {
  const uint64_t before = Stats(cons).kv_xfer_fallbacks;
  const auto t0 = std::chrono::steady_clock::now();
  const GenRun got = Generate(cons, prompt, int(want.tokens.size()), desc.c_str());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s);
  EXPECT_EQ(got.status, LLM_OK);
  EXPECT_EQ(got.xfer_status, why);
  EXPECT_EQ(got.transferred, 0);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(Stats(cons).kv_xfer_fallbacks, before + 1);
  ExpectIdle(cons);
}

TEST_F(Disagg, ProducerGoneFallsBack) {
  llm_ctx* single = MakeCtx(LLM_KV_ROLE_NONE);
  llm_ctx* prod = MakeCtx(LLM_KV_ROLE_PRODUCER);
  llm_ctx* cons = MakeCtx(LLM_KV_ROLE_CONSUMER);
  ASSERT_TRUE(single && prod && cons);
  const std::vector<llm_token> prompt = Prompt(64);
  const GenRun want = Generate(single, prompt, 16);
  const GenRun pre = Generate(prod, prompt, 1, nullptr, 1);
  ASSERT_FALSE(pre.desc.empty());
  llm_ctx_destroy(prod);  // the producer exits before the consumer pulls
  ExpectFallback(cons, prompt, want, pre.desc, LLM_ERR_IO);
  llm_ctx_destroy(single);
  llm_ctx_destroy(cons);
}

TEST_F(Disagg, ExpiredLeaseFallsBack) {
  llm_ctx* single = MakeCtx(LLM_KV_ROLE_NONE);
  llm_ctx* prod = MakeCtx(LLM_KV_ROLE_PRODUCER, nullptr, 50);
  llm_ctx* cons = MakeCtx(LLM_KV_ROLE_CONSUMER);
  ASSERT_TRUE(single && prod && cons);
  const std::vector<llm_token> prompt = Prompt(64);
  const GenRun want = Generate(single, prompt, 16);
  const GenRun pre = Generate(prod, prompt, 1, nullptr, 1);
  ASSERT_FALSE(pre.desc.empty());
  EXPECT_EQ(Stats(prod).kv_leases_active, 1);
  std::this_thread::sleep_for(200ms);
  ExpectFallback(cons, prompt, want, pre.desc, LLM_ERR_IO);
  const llm_stats ps = Stats(prod);
  EXPECT_EQ(ps.kv_leases_expired, 1u);
  EXPECT_EQ(ps.kv_leases_active, 0);
  EXPECT_EQ(ps.kv_xfer_served, 0u);
  ExpectIdle(prod);
  llm_ctx_destroy(single);
  llm_ctx_destroy(prod);
  llm_ctx_destroy(cons);
}

std::string SynthModel(uint64_t seed) {
  const std::string path = ::testing::TempDir() + "/llmrt_disagg_" + std::to_string(seed) + "_" +
                           std::to_string(::getpid()) + ".gguf";
  synth::SynthOptions o;
  o.seed = seed;
  o.stddev = 0.05f;
  o.norm_std = 0.1f;
  const synth::SynthShape* s = synth::FindSynthShape("tiny-llama3");
  EXPECT_NE(s, nullptr);
  if (s == nullptr) return {};
  EXPECT_TRUE(synth::WriteSynthModel(*s, o, path).ok());
  return path;
}

TEST_F(Disagg, ProducerWithAnotherModelIsRefused) {
  // Same shape, other weights: only the fingerprint tells them apart.
  const std::string m1 = SynthModel(1), m2 = SynthModel(2);
  llm_ctx* single = MakeCtx(LLM_KV_ROLE_NONE, m2.c_str());
  llm_ctx* prod = MakeCtx(LLM_KV_ROLE_PRODUCER, m1.c_str());
  llm_ctx* cons = MakeCtx(LLM_KV_ROLE_CONSUMER, m2.c_str());
  ASSERT_TRUE(single && prod && cons);
  const std::vector<llm_token> prompt = Prompt(64);
  const GenRun want = Generate(single, prompt, 16);
  const GenRun pre = Generate(prod, prompt, 1, nullptr, 1);
  ASSERT_FALSE(pre.desc.empty());
  // The descriptor names the producer's model: refused before connecting.
  ExpectFallback(cons, prompt, want, pre.desc, LLM_ERR_KV_MISMATCH);
  // A descriptor that lies about the model: the producer's handshake refuses.
  StatusOr<disagg::TransferDescriptor> d = disagg::ParseDescriptor(pre.desc);
  ASSERT_TRUE(d.ok());
  // The consumer's own digests: a producer context of its model says them.
  llm_ctx* cons_as_prod = nullptr;
  {
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    p.model_path = m2.c_str();
    p.backend = LLM_BACKEND_CPU;
    p.n_threads = 1;
    p.kv_role = LLM_KV_ROLE_PRODUCER;
    ASSERT_EQ(llm_ctx_create(&p, &cons_as_prod), LLM_OK) << llm_last_error();
  }
  const GenRun own = Generate(cons_as_prod, prompt, 1, nullptr, 1);
  StatusOr<disagg::TransferDescriptor> mine = disagg::ParseDescriptor(own.desc);
  ASSERT_TRUE(mine.ok());
  d->model_digest = mine->model_digest;
  d->geometry_digest = mine->geometry_digest;
  ExpectFallback(cons, prompt, want, disagg::FormatDescriptor(*d), LLM_ERR_KV_MISMATCH);
  ExpectIdle(prod);
  llm_ctx_destroy(cons_as_prod);
  llm_ctx_destroy(single);
  llm_ctx_destroy(prod);
  llm_ctx_destroy(cons);
  std::remove(m1.c_str());
  std::remove(m2.c_str());
}

// A lease table and server of the test's own, holding a stream the test
// corrupts: what a consumer sees when bytes flip on the way.
TEST_F(Disagg, FlippedBytesAreNeverUsed) {
  llm_ctx* single = MakeCtx(LLM_KV_ROLE_NONE);
  llm_ctx* prod = MakeCtx(LLM_KV_ROLE_PRODUCER);
  llm_ctx* cons = MakeCtx(LLM_KV_ROLE_CONSUMER);
  ASSERT_TRUE(single && prod && cons);
  const std::vector<llm_token> prompt = Prompt(64);
  const GenRun want = Generate(single, prompt, 16);
  const GenRun pre = Generate(prod, prompt, 1, nullptr, 1);
  StatusOr<disagg::TransferDescriptor> d = disagg::ParseDescriptor(pre.desc);
  ASSERT_TRUE(d.ok());
  // The same stream, exported from the single context (it holds the prompt).
  std::vector<uint8_t> stream;
  int32_t n_tok = 0;
  auto write = [](void* u, const void* data, size_t n) -> int32_t {
    auto* v = static_cast<std::vector<uint8_t>*>(u);
    v->insert(v->end(), static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + n);
    return 0;
  };
  ASSERT_EQ(llm_kv_export(single, prompt.data(), int32_t(prompt.size()), 0, write, &stream, &n_tok), LLM_OK);
  ASSERT_EQ(stream.size(), d->bytes);
  for (size_t at : {stream.size() / 3, stream.size() - 100}) {  // in block 0 or 1's K/V; in the last block
    std::vector<uint8_t> bad = stream;
    bad[at] ^= 0x10;
    disagg::LeaseTable leases(10s);
    disagg::ServerOptions so;
    so.identity.model_digest = d->model_digest;
    so.identity.geometry_digest = d->geometry_digest;
    so.leases = &leases;
    StatusOr<std::unique_ptr<disagg::KvServer>> server = disagg::StartKvServer(so);
    ASSERT_TRUE(server.ok()) << server.status().message();
    disagg::TransferDescriptor fake = *d;
    fake.port = (*server)->port();
    fake.lease = leases.Add(bad, n_tok);
    const GenRun got = Generate(cons, prompt, 16, disagg::FormatDescriptor(fake).c_str());
    EXPECT_EQ(got.status, LLM_OK);
    EXPECT_EQ(got.xfer_status, LLM_ERR_KV_CORRUPT) << at;
    EXPECT_EQ(got.tokens, want.tokens) << at;
    // Blocks before the flipped one passed their own checksums; none after.
    const int32_t block = 16;
    EXPECT_LT(got.transferred, n_tok) << at;
    EXPECT_EQ(got.transferred % block, 0);
    ExpectIdle(cons);
    // Evict what the good blocks left in the cache so the next case starts cold.
    llm_ctx_destroy(cons);
    cons = MakeCtx(LLM_KV_ROLE_CONSUMER);
    ASSERT_NE(cons, nullptr);
  }
  llm_ctx_destroy(single);
  llm_ctx_destroy(prod);
  llm_ctx_destroy(cons);
}

// A producer that goes away while a pull moves its runs: the pull ends in
// an error within its step timeout, never a hang and never a short stream.
TEST_F(Disagg, ProducerDyingMidTransferEndsThePull) {
  disagg::LeaseTable leases(10s);
  disagg::ServerOptions so;
  so.identity.model_digest = 1;
  so.identity.geometry_digest = 2;
  so.leases = &leases;
  StatusOr<std::unique_ptr<disagg::KvServer>> server = disagg::StartKvServer(so);
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::vector<uint8_t> big(size_t{96} << 20, 0x5a);
  disagg::TransferDescriptor d;
  d.host = "127.0.0.1";
  d.port = (*server)->port();
  d.model_digest = 1;
  d.geometry_digest = 2;
  d.n_tokens = 16;
  d.bytes = big.size();
  d.lease = leases.Add(std::move(big), 16);
  disagg::PullOptions po;
  po.identity = so.identity;
  po.chunk_bytes = 64 << 10;  // many runs, so the producer dies between two of them
  po.step_timeout_ms = 3000;
  StatusOr<disagg::PullResult> result = InternalError("not run");
  std::atomic<bool> finished{false};
  const auto t0 = std::chrono::steady_clock::now();
  std::thread puller([&] {
    result = disagg::PullKv(d, po);
    finished = true;
  });
  // Wait until part of the stream has gone, then kill the producer.
  while (leases.counters().bytes_served == 0 && !finished) std::this_thread::sleep_for(1ms);
  server->reset();
  puller.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  ASSERT_FALSE(result.ok()) << "the pull finished before the producer went away";
  EXPECT_EQ(result.status().code(), LLM_ERR_IO) << result.status().message();
}

// ---------------------------------------------------------------- CUDA

// The roles on a CUDA context (its BF16 pool in the wire layout:
// cuda_kv_io.cpp), staged through host memory: the producer exports its
// blocks into the lease's host buffer, the consumer imports the pulled
// stream block by block. Across backends the KV converts (F16 -> BF16
// rounds, BF16 -> F16 is exact), so the consumer's greedy continuation is
// compared with a context of its own backend that computed the prompt, by
// the CUDA tests' near-tie rule (support/api_greedy.h).
llm_ctx* MakeBackendCtx(int32_t backend, int32_t role) {
  const std::string path = test::ModelPathF32();
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = path.c_str();
  p.backend = backend;
  p.n_threads = 1;
  p.n_ctx = 256;
  p.kv_role = role;
  p.n_gpu_layers = -1;
  llm_ctx* ctx = nullptr;
  if (llm_ctx_create(&p, &ctx) != LLM_OK) {
    ADD_FAILURE() << llm_last_error();
    return nullptr;
  }
  return ctx;
}

void AcrossBackends(int32_t producer_backend, int32_t consumer_backend) {
  llm_ctx* prod = MakeBackendCtx(producer_backend, LLM_KV_ROLE_PRODUCER);
  llm_ctx* cons = MakeBackendCtx(consumer_backend, LLM_KV_ROLE_CONSUMER);
  llm_ctx* computed = MakeBackendCtx(consumer_backend, LLM_KV_ROLE_NONE);
  ASSERT_TRUE(prod && cons && computed);
  for (int len : {40, 64}) {
    SCOPED_TRACE("prompt of " + std::to_string(len));
    const std::vector<llm_token> prompt = Prompt(len, len);
    const GenRun pre = Generate(prod, prompt, 1, nullptr, 1);
    ASSERT_EQ(pre.status, LLM_OK);
    ASSERT_FALSE(pre.desc.empty());
    const test::ApiGreedyRun want = test::ApiGreedy(computed, prompt, 16);
    const test::ApiGreedyRun got = test::ApiGreedy(cons, prompt, 16, 2, 0, pre.desc.c_str());
    ASSERT_EQ(got.status, LLM_OK);
    EXPECT_EQ(got.kv_transfer_status, LLM_OK);
    EXPECT_GE(got.transferred, (len - 1) / 16 * 16);
    EXPECT_EQ(got.metrics.cached_prompt_tokens, got.transferred);
    test::ExpectEqualUpToNearTie(want, got, 0.1f);
  }
  EXPECT_EQ(Stats(cons).kv_xfer_pulls, 2u);
  EXPECT_EQ(Stats(cons).kv_xfer_fallbacks, 0u);
  EXPECT_EQ(WaitStats(prod, [](const llm_stats& s) { return s.kv_xfer_served == 2; }).kv_xfer_served, 2u);
  ExpectIdle(prod);
  ExpectIdle(cons);
  llm_ctx_destroy(computed);
  llm_ctx_destroy(cons);
  llm_ctx_destroy(prod);
}

TEST_F(Disagg, CpuProducerCudaConsumer) {
  SKIP_WITHOUT_DEVICE();
  AcrossBackends(LLM_BACKEND_CPU, LLM_BACKEND_CUDA);
}

TEST_F(Disagg, CudaProducerCpuConsumer) {
  SKIP_WITHOUT_DEVICE();
  AcrossBackends(LLM_BACKEND_CUDA, LLM_BACKEND_CPU);
}

// A CUDA context holding only some layers cannot read its blocks whole:
// the role is refused at creation, with the reason.
TEST_F(Disagg, PartialOffloadRefusesARole) {
  SKIP_WITHOUT_DEVICE();
  const std::string path = test::ModelPathF32();
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = path.c_str();
  p.backend = LLM_BACKEND_CUDA;
  p.n_gpu_layers = 2;
  p.kv_role = LLM_KV_ROLE_PRODUCER;
  llm_ctx* ctx = nullptr;
  EXPECT_EQ(llm_ctx_create(&p, &ctx), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(llm_last_error()).find("kv_role"), std::string::npos) << llm_last_error();
}

}  // namespace
}  // namespace llm
