// The host-memory and disk tiers under the prefix cache (kvstate/kv_tiers.h)
// and requests that keep their KV (llm_request.keep_kv), through the C API:
// a prefix evicted from a small pool comes back from host memory or disk
// (the request's cached-token count shows it) and the continuation is
// bitwise that of the cold run; the disk tier survives a new context; files
// of another model, corrupt files and unwritable directories never fail a
// request.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "kvstate/host_tier.h"
#include "llm.h"
#include "support/api_greedy.h"
#include "support/api_helpers.h"
#include "support/real_models.h"
#include "synth_model.h"

namespace llm {
namespace {

namespace fs = std::filesystem;
using test::ApiGreedy;
using test::ApiGreedyRun;

struct TierOpts {
  uint64_t host_bytes = 0;
  std::string disk_dir;
  uint64_t disk_bytes = 0;
  int32_t n_blocks = 8;
};

llm_status MakeCtx(const std::string& model, const TierOpts& o, llm_ctx** out) {
  llm_ctx_params cp;
  llm_ctx_params_init(&cp);
  cp.model_path = model.c_str();
  cp.backend = LLM_BACKEND_CPU;
  cp.n_threads = 2;
  cp.n_ctx = 128;
  cp.n_kv_blocks = o.n_blocks;
  cp.kv_host_bytes = o.host_bytes;
  cp.kv_disk_dir = o.disk_dir.empty() ? nullptr : o.disk_dir.c_str();
  cp.kv_disk_bytes = o.disk_bytes;
  return llm_ctx_create(&cp, out);
}

struct Ctx {
  llm_ctx* p = nullptr;
  Ctx(const std::string& model, const TierOpts& o) {
    EXPECT_EQ(MakeCtx(model, o, &p), LLM_OK) << llm_last_error();
  }
  ~Ctx() { llm_ctx_destroy(p); }
  Ctx(const Ctx&) = delete;
  Ctx& operator=(const Ctx&) = delete;
  llm_stats Stats() const {
    llm_stats s{};
    s.struct_size = sizeof s;
    EXPECT_EQ(llm_get_stats(p, &s), LLM_OK);
    return s;
  }
};

// A deterministic prompt of `n` ids after BOS; `variant` picks another one.
std::vector<llm_token> Prompt(int n, int variant = 0) {
  std::vector<llm_token> p{1};
  for (int i = 1; i < n; ++i) p.push_back((7 * i + 11 + 31 * variant) % 250 + 3);
  return p;
}

std::string TempDir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "/llmrt_tiers_" + name + "_" + std::to_string(::getpid());
  fs::remove_all(d);
  return d;
}

void ExpectSameRun(const ApiGreedyRun& got, const ApiGreedyRun& want) {
  ASSERT_EQ(got.status, LLM_OK);
  EXPECT_EQ(got.tokens, want.tokens);
  ASSERT_EQ(got.top.size(), want.top.size());
  for (size_t i = 0; i < want.top.size(); ++i) {
    ASSERT_FALSE(got.top[i].empty());
    EXPECT_EQ(got.top[i][0].logprob, want.top[i][0].logprob) << "position " << i << " (CPU: bitwise)";
  }
}

// 64-token prompts and 8 generated tokens take 5 of the 8 pool blocks: two
// other such requests evict every cached block of the first.
constexpr int kPrompt = 64, kGen = 8, kCached = 48;  // (64 - 1) / 16 full blocks

void EvictWithOthers(llm_ctx* ctx) {
  for (int v = 1; v <= 2; ++v) ASSERT_EQ(ApiGreedy(ctx, Prompt(kPrompt, v), kGen).status, LLM_OK);
}

TEST(KvTiers, WithoutTiersTheEvictedPrefixIsRecomputed) {  // the control for the tests below
  Ctx c(test::ModelPathF32(), {});
  ASSERT_EQ(ApiGreedy(c.p, Prompt(kPrompt), kGen).status, LLM_OK);
  EvictWithOthers(c.p);
  const ApiGreedyRun again = ApiGreedy(c.p, Prompt(kPrompt), kGen);
  EXPECT_EQ(again.metrics.cached_prompt_tokens, 0);
}

TEST(KvTiers, HostTierGivesAnEvictedPrefixBack) {
  Ctx c(test::ModelPathF32(), {64u << 20, "", 0, 8});
  const ApiGreedyRun cold = ApiGreedy(c.p, Prompt(kPrompt), kGen);
  ASSERT_EQ(cold.status, LLM_OK);
  EXPECT_EQ(cold.metrics.cached_prompt_tokens, 0);
  EvictWithOthers(c.p);
  const llm_stats before = c.Stats();
  EXPECT_GT(before.kv_tier_bytes_down, 0u);
  EXPECT_GT(before.kv_tier_host_bytes, 0u);
  const ApiGreedyRun warm = ApiGreedy(c.p, Prompt(kPrompt), kGen);
  EXPECT_EQ(warm.metrics.cached_prompt_tokens, kCached) << "the evicted prefix did not come back from host memory";
  ExpectSameRun(warm, cold);
  const llm_stats after = c.Stats();
  EXPECT_GE(after.kv_tier_host_hit_tokens - before.kv_tier_host_hit_tokens, static_cast<uint64_t>(kCached));
  EXPECT_GT(after.kv_tier_bytes_up, before.kv_tier_bytes_up);
  EXPECT_EQ(after.kv_tier_disk_hit_tokens, 0u);
}

TEST(KvTiers, DiskTierGivesAnEvictedPrefixBack) {
  const std::string dir = TempDir("disk");
  {
    Ctx c(test::ModelPathF32(), {0, dir, 256u << 20});
    const ApiGreedyRun cold = ApiGreedy(c.p, Prompt(kPrompt), kGen);
    EvictWithOthers(c.p);
    EXPECT_EQ(c.Stats().kv_tier_disk_on, 1);
    EXPECT_GT(c.Stats().kv_tier_disk_bytes, 0u);
    const ApiGreedyRun warm = ApiGreedy(c.p, Prompt(kPrompt), kGen);
    EXPECT_EQ(warm.metrics.cached_prompt_tokens, kCached) << "the evicted prefix did not come back from disk";
    ExpectSameRun(warm, cold);
    EXPECT_GE(c.Stats().kv_tier_disk_hit_tokens, static_cast<uint64_t>(kCached));
  }
  fs::remove_all(dir);
}

TEST(KvTiers, HostThenDiskAndBudgets) {
  // A host tier of about two blocks pushes the rest down to disk; the
  // prefix comes back from both.
  const std::string dir = TempDir("both");
  {
    Ctx probe(test::ModelPathF32(), {});
    const uint64_t block = probe.Stats().kv_pool_bytes / 8;
    Ctx c(test::ModelPathF32(), {2 * block + 1024, dir, 256u << 20});
    const ApiGreedyRun cold = ApiGreedy(c.p, Prompt(kPrompt), kGen);
    EvictWithOthers(c.p);
    EXPECT_LE(c.Stats().kv_tier_host_bytes, 2 * block + 1024);
    const ApiGreedyRun warm = ApiGreedy(c.p, Prompt(kPrompt), kGen);
    EXPECT_EQ(warm.metrics.cached_prompt_tokens, kCached);
    ExpectSameRun(warm, cold);
    const llm_stats s = c.Stats();
    EXPECT_EQ(s.kv_tier_host_hit_tokens + s.kv_tier_disk_hit_tokens >= static_cast<uint64_t>(kCached), true);
    EXPECT_GT(s.kv_tier_disk_hit_tokens, 0u);
  }
  fs::remove_all(dir);
}

TEST(KvTiers, DiskTierSurvivesANewContext) {
  const std::string dir = TempDir("restart");
  ApiGreedyRun cold;
  {
    Ctx a(test::ModelPathF32(), {0, dir, 256u << 20});
    cold = ApiGreedy(a.p, Prompt(kPrompt), kGen);
    ASSERT_EQ(cold.status, LLM_OK);
  }  // destroy: the pool's cached blocks go to disk
  Ctx b(test::ModelPathF32(), {0, dir, 256u << 20});
  EXPECT_GT(b.Stats().kv_tier_disk_bytes, 0u) << "the directory scan found nothing";
  const ApiGreedyRun warm = ApiGreedy(b.p, Prompt(kPrompt), kGen);
  EXPECT_EQ(warm.metrics.cached_prompt_tokens, kCached) << "a new context did not find the prefix on disk";
  ExpectSameRun(warm, cold);
  EXPECT_GE(b.Stats().kv_tier_disk_hit_tokens, static_cast<uint64_t>(kCached));
  fs::remove_all(dir);
}

TEST(KvTiers, SmolLM2HostAndDiskTiers) {
  const std::string model = test::RealModelPath(test::kSmolLM2);
  if (!fs::exists(model)) GTEST_SKIP() << "SmolLM2 not fetched (scripts/fetch-models.sh)";
  const std::string dir = TempDir("smollm2");
  ApiGreedyRun cold;
  {
    Ctx c(model, {64u << 20, dir, 256u << 20});
    cold = ApiGreedy(c.p, Prompt(kPrompt), kGen);
    ASSERT_EQ(cold.status, LLM_OK);
    EvictWithOthers(c.p);
    const ApiGreedyRun warm = ApiGreedy(c.p, Prompt(kPrompt), kGen);
    EXPECT_EQ(warm.metrics.cached_prompt_tokens, kCached);
    ExpectSameRun(warm, cold);
    EXPECT_GE(c.Stats().kv_tier_host_hit_tokens, static_cast<uint64_t>(kCached));
  }
  Ctx b(model, {0, dir, 256u << 20});
  const ApiGreedyRun warm = ApiGreedy(b.p, Prompt(kPrompt), kGen);
  EXPECT_EQ(warm.metrics.cached_prompt_tokens, kCached);
  ExpectSameRun(warm, cold);
  EXPECT_GE(b.Stats().kv_tier_disk_hit_tokens, static_cast<uint64_t>(kCached));
  fs::remove_all(dir);
}

std::vector<fs::path> TierFiles(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".llmkv") out.push_back(e.path());
  return out;
}

TEST(KvTiers, AnotherModelsFilesAreIgnoredAndKept) {
  const std::string dir = TempDir("foreign");
  const std::string synth = ::testing::TempDir() + "/llmrt_tiers_synth_" + std::to_string(::getpid()) + ".gguf";
  synth::SynthOptions so;
  ASSERT_TRUE(synth::WriteSynthModel(*synth::FindSynthShape("tiny-llama3"), so, synth).ok());
  {
    Ctx other(synth, {0, dir, 256u << 20});
    ASSERT_EQ(ApiGreedy(other.p, Prompt(kPrompt), kGen).status, LLM_OK);
  }
  const size_t n_foreign = TierFiles(dir).size();
  ASSERT_GT(n_foreign, 0u);
  {
    Ctx c(test::ModelPathF32(), {0, dir, 256u << 20});
    const llm_stats s = c.Stats();
    EXPECT_EQ(s.kv_tier_files_refused, n_foreign);
    EXPECT_EQ(s.kv_tier_disk_bytes, 0u);
    EXPECT_EQ(s.kv_tier_disk_on, 1);
    const ApiGreedyRun r = ApiGreedy(c.p, Prompt(kPrompt), kGen);
    ASSERT_EQ(r.status, LLM_OK);
    EXPECT_EQ(r.metrics.cached_prompt_tokens, 0);
  }
  // Not ours to delete: the other model's files are all still there (and ours beside them).
  EXPECT_GE(TierFiles(dir).size(), n_foreign + 1);
  {  // and the other model still finds its prefix
    Ctx other(synth, {0, dir, 256u << 20});
    EXPECT_EQ(ApiGreedy(other.p, Prompt(kPrompt), kGen).metrics.cached_prompt_tokens, kCached);
  }
  fs::remove_all(dir);
  fs::remove(synth);
}

void FlipByte(const fs::path& p, std::streamoff at) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  if (at < 0) at += static_cast<std::streamoff>(fs::file_size(p));
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x40);
  f.seekp(at);
  f.write(&c, 1);
}

TEST(KvTiers, CorruptFilesAreDeletedAndRecomputed) {
  const std::string dir = TempDir("corrupt");
  ApiGreedyRun cold;
  {
    Ctx a(test::ModelPathF32(), {0, dir, 256u << 20});
    cold = ApiGreedy(a.p, Prompt(kPrompt), kGen);
  }
  std::vector<fs::path> files = TierFiles(dir);
  ASSERT_GE(files.size(), 3u);
  FlipByte(files[0], 20);   // in the header: found by the scan
  FlipByte(files[1], -12);  // in the block's K/V: found at load, by the checksum
  fs::resize_file(files[2], fs::file_size(files[2]) / 2);  // truncated
  {
    Ctx b(test::ModelPathF32(), {0, dir, 256u << 20});
    const ApiGreedyRun r = ApiGreedy(b.p, Prompt(kPrompt), kGen);
    ExpectSameRun(r, cold);  // whatever was lost is recomputed, bitwise as before
    EXPECT_LT(r.metrics.cached_prompt_tokens, kCached);
    EXPECT_GE(b.Stats().kv_tier_files_refused, 1u);
  }
  // A damaged file is deleted when read (a lookup reads along the prefix
  // and stops at the first miss, so one behind it waits for a later
  // context); the blocks recomputed go down again at destroy. Within three
  // more contexts the whole prefix is back, every run bitwise the cold one.
  int32_t cached = 0;
  for (int round = 0; round < 3 && cached != kCached; ++round) {
    Ctx c(test::ModelPathF32(), {0, dir, 256u << 20});
    const ApiGreedyRun r = ApiGreedy(c.p, Prompt(kPrompt), kGen);
    ExpectSameRun(r, cold);
    cached = r.metrics.cached_prompt_tokens;
  }
  EXPECT_EQ(cached, kCached) << "the damaged files were not replaced";
  fs::remove_all(dir);
}

TEST(KvTiers, UnwritableDirectoryDegradesToNoTier) {
  // A "directory" below a regular file cannot be created.
  const std::string file = TempDir("file");
  { std::ofstream(file) << "x"; }
  {
    Ctx c(test::ModelPathF32(), {0, file + "/tiers", 256u << 20});
    ASSERT_NE(c.p, nullptr);
    EXPECT_EQ(c.Stats().kv_tier_disk_on, 0);
    const ApiGreedyRun r = ApiGreedy(c.p, Prompt(kPrompt), kGen);
    EXPECT_EQ(r.status, LLM_OK);
    EvictWithOthers(c.p);
  }
  fs::remove(file);
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories: the chmod case needs another user";
  const std::string dir = TempDir("readonly");
  fs::create_directories(dir);
  ::chmod(dir.c_str(), 0555);
  {
    Ctx c(test::ModelPathF32(), {0, dir, 256u << 20});
    EXPECT_EQ(c.Stats().kv_tier_disk_on, 0);
    EXPECT_EQ(ApiGreedy(c.p, Prompt(kPrompt), kGen).status, LLM_OK);
  }
  ::chmod(dir.c_str(), 0755);
  fs::remove_all(dir);
}

TEST(KvTiers, ADiskThatFailsLaterTurnsTheTierOff) {
  // The directory disappears under the context (as a full or unmounted
  // disk would fail writes): evictions turn the tier off, requests go on.
  const std::string dir = TempDir("vanish");
  Ctx c(test::ModelPathF32(), {0, dir, 256u << 20});
  EXPECT_EQ(c.Stats().kv_tier_disk_on, 1);
  fs::remove_all(dir);
  { std::ofstream(dir) << "now a file"; }
  ASSERT_EQ(ApiGreedy(c.p, Prompt(kPrompt), kGen).status, LLM_OK);
  EvictWithOthers(c.p);
  const ApiGreedyRun r = ApiGreedy(c.p, Prompt(kPrompt), kGen);
  EXPECT_EQ(r.status, LLM_OK);
  EXPECT_EQ(c.Stats().kv_tier_disk_on, 0);
  fs::remove(dir);
}

TEST(KvTiers, ParamsAreChecked) {
  llm_ctx* ctx = nullptr;
  EXPECT_EQ(MakeCtx(test::ModelPathF32(), {1, "", 0}, &ctx), LLM_ERR_INVALID_ARGUMENT);  // less than a block
  EXPECT_NE(std::string(llm_last_error()).find("kv_host_bytes"), std::string::npos) << llm_last_error();
  EXPECT_EQ(MakeCtx(test::ModelPathF32(), {0, "", 1u << 20}, &ctx), LLM_ERR_INVALID_ARGUMENT);  // bytes, no dir
  EXPECT_NE(std::string(llm_last_error()).find("kv_disk_dir"), std::string::npos) << llm_last_error();
  const std::string dir = TempDir("params");
  EXPECT_EQ(MakeCtx(test::ModelPathF32(), {0, dir, 100}, &ctx), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctx, nullptr);
  // An older caller's struct (before the tier fields) gets no tiers.
  llm_ctx_params cp;
  llm_ctx_params_init(&cp);
  const std::string model = test::ModelPathF32();
  cp.model_path = model.c_str();
  cp.backend = LLM_BACKEND_CPU;
  cp.kv_disk_dir = "/nonexistent/never/created";
  cp.struct_size = offsetof(llm_ctx_params, kv_host_bytes);
  ASSERT_EQ(llm_ctx_create(&cp, &ctx), LLM_OK) << llm_last_error();
  llm_stats s{};
  s.struct_size = sizeof s;
  llm_get_stats(ctx, &s);
  EXPECT_EQ(s.kv_tier_disk_on, 0);
  llm_ctx_destroy(ctx);
  fs::remove_all(dir);
}

// ---- keep_kv: a conversation's blocks are evicted after everyone else's

void KeepCase(int32_t keep, int32_t want_cached) {
  Ctx c(test::ModelPathF32(), {0, "", 0, 12});
  ASSERT_EQ(ApiGreedy(c.p, Prompt(kPrompt), kGen, 0, keep).status, LLM_OK);
  for (int v = 1; v <= 3; ++v) ASSERT_EQ(ApiGreedy(c.p, Prompt(kPrompt, v), kGen).status, LLM_OK);
  const ApiGreedyRun again = ApiGreedy(c.p, Prompt(kPrompt), kGen);
  EXPECT_EQ(again.metrics.cached_prompt_tokens, want_cached) << "keep_kv " << keep;
}

TEST(KvTiers, KeepKvProtectsAConversationFromEviction) {
  KeepCase(1, kCached);
  KeepCase(0, 0);  // the control: without it the same traffic evicts the prefix
}

TEST(KvTiers, KeepKvIsChecked) {
  Ctx c(test::ModelPathF32(), {});
  ApiGreedyRun r = ApiGreedy(c.p, Prompt(8), 1, 0, 2);
  EXPECT_EQ(r.status, LLM_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace llm

namespace llm {
namespace {

// The host tier's slots: least recently used out first, but never the entry
// pinned by a restore in progress (KvTiers::Stage pins it until
// WriteStaged, since the pool allocation between them may evict a block
// into the host tier: on CUDA the copy into a reused slot would overwrite
// the staged K/V before the restore reads them).
TEST(KvTiers, HostTierSlotsKeepThePinnedEntry) {
  const std::vector<int32_t> toks(16, 5);
  kvstate::HostTier h(2);
  bool no_room = true;
  EXPECT_FALSE(h.MakeRoom(&no_room).has_value());
  EXPECT_FALSE(no_room);
  const int32_t sa = h.Insert(101, 0, 0, toks);
  EXPECT_FALSE(h.MakeRoom(&no_room).has_value());
  const int32_t sb = h.Insert(102, 101, 0, toks);
  EXPECT_NE(sa, sb);
  h.Pin(101);  // the least recently used entry, pinned
  std::optional<kvstate::HostEntry> out = h.MakeRoom(&no_room);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->hash, 102u) << "the pinned entry went out";
  EXPECT_EQ(h.Insert(103, 0, 0, toks), sb) << "the freed slot is reused";
  ASSERT_NE(h.Find(101, 0, toks), nullptr);
  EXPECT_EQ(h.Find(101, 0, toks)->slot, sa);
  EXPECT_EQ(h.Find(101, 7, toks), nullptr) << "another parent is a collision, not a hit";

  kvstate::HostTier one(1);
  one.MakeRoom(&no_room);
  one.Insert(201, 0, 0, toks);
  one.Pin(201);
  EXPECT_FALSE(one.MakeRoom(&no_room).has_value());
  EXPECT_TRUE(no_room) << "the only slot is pinned: the evicted block must go elsewhere";
  one.Unpin();
  out = one.MakeRoom(&no_room);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->hash, 201u);
  one.Forget(201);  // absent now: a no-op
  EXPECT_EQ(one.size(), 0u);
}

// Regenerates the fuzz seeds of the tier file reader (tests/fuzz/corpus/
// kv_tier_file/ and a tier file among kv_reader's): a stories260K block file
// of each element type.
TEST(KvTiers, DISABLED_WriteFuzzSeeds) {
  for (int32_t elem : {LLM_KV_F16, LLM_KV_Q8_0}) {
    const std::string dir = TempDir("seeds");
    {
      llm_ctx_params cp;
      llm_ctx_params_init(&cp);
      const std::string model = test::ModelPathF32();
      cp.model_path = model.c_str();
      cp.backend = LLM_BACKEND_CPU;
      cp.n_ctx = 64;
      cp.kv_type = elem;
      cp.kv_disk_dir = dir.c_str();
      llm_ctx* ctx = nullptr;
      ASSERT_EQ(llm_ctx_create(&cp, &ctx), LLM_OK);
      ASSERT_EQ(ApiGreedy(ctx, Prompt(20), 1).status, LLM_OK);
      llm_ctx_destroy(ctx);
    }
    const std::vector<fs::path> files = TierFiles(dir);
    ASSERT_EQ(files.size(), 1u);
    const std::string name = elem == LLM_KV_F16 ? "stories-f16-tier" : "stories-q8-tier";
    const std::string src = LLM_SOURCE_DIR;
    fs::create_directories(src + "/tests/fuzz/corpus/kv_tier_file");
    fs::copy_file(files[0], src + "/tests/fuzz/corpus/kv_tier_file/" + name, fs::copy_options::overwrite_existing);
    fs::copy_file(files[0], src + "/tests/fuzz/corpus/kv_reader/" + name, fs::copy_options::overwrite_existing);
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace llm
