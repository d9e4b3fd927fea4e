// KV state that leaves the context (issue 30): what restoring a prefix
// costs against recomputing it, through the public C API.
//
//   kv-state-bench [--model PATH] [--tokens N] [--rounds R] [--threads T] [--kv-type f32|f16|q8_0] [--dir DIR]
//                  [--variant V]  (round r's prompt is variant V + 2r: bench/kv_state_peer.py runs one round at a time)
//
// For each of R rounds (a different prompt of N tokens each, so no round
// reuses another's cache):
//   cold      TTFT of the prompt in a fresh context (computed)
//   save      llm_kv_export_file of its prefix: MB/s, bytes per token
//   load      llm_kv_import_file into another fresh context, right after
//             the save: MB/s
//   restored  TTFT of the same prompt there (served from the import)
//   host      TTFT after the prefix was evicted to the host-memory tier
//   disk      TTFT in a new context on the disk tier the first one filled
// and prints the medians. Figures on a shared machine move by tens of
// percent: run it when the machine is quiet (bench/README.md).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "llm.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct Opts {
  std::string model;  // empty: the built-in model
  int tokens = 1024;
  int rounds = 3;
  int threads = 0;
  int kv_type = LLM_KV_AUTO;
  std::string dir = "/tmp";
  int variant = 0;
};

[[noreturn]] void Die(const char* what, llm_status st) {
  std::fprintf(stderr, "kv-state-bench: %s: %s: %s\n", what, llm_status_str(st), llm_last_error());
  std::exit(1);
}

llm_ctx* Make(const Opts& o, int n_blocks, uint64_t host_bytes, const std::string& disk_dir) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = o.model.empty() ? nullptr : o.model.c_str();
  p.backend = LLM_BACKEND_CPU;
  p.n_threads = o.threads;
  p.n_ctx = o.tokens + 16;
  p.kv_type = o.kv_type;
  p.n_kv_blocks = n_blocks;
  p.kv_host_bytes = host_bytes;
  p.kv_disk_dir = disk_dir.empty() ? nullptr : disk_dir.c_str();
  llm_ctx* ctx = nullptr;
  if (llm_status st = llm_ctx_create(&p, &ctx); st != LLM_OK) Die("llm_ctx_create", st);
  return ctx;
}

std::vector<llm_token> Prompt(int n, int variant, int32_t n_vocab) {
  std::vector<llm_token> p{1};
  const int span = std::max(1, std::min(n_vocab - 3, 4000));
  for (int i = 1; i < n; ++i) p.push_back((7 * i + 11 + 131 * variant) % span + 3);
  return p;
}

// One greedy token after `prompt`: its metrics (TTFT, cached prompt tokens).
llm_metrics Run(llm_ctx* ctx, const std::vector<llm_token>& prompt) {
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0.0f;
  llm_request r;
  llm_request_init(&r);
  r.prompt_tokens = prompt.data();
  r.n_prompt_tokens = static_cast<int32_t>(prompt.size());
  r.max_tokens = 1;
  r.sampling = &sp;
  llm_request_id id = 0;
  if (llm_status st = llm_submit(ctx, &r, &id); st != LLM_OK) Die("llm_submit", st);
  llm_event ev[16];
  for (;;) {
    ev[0].struct_size = sizeof(llm_event);
    uint32_t n = 0;
    llm_poll(ctx, ev, 16, &n, 1000);
    for (uint32_t i = 0; i < n; ++i) {
      if (ev[i].request_id != id || ev[i].type != LLM_EVENT_FINAL) continue;
      if (ev[i].status != LLM_OK) Die("request", ev[i].status);
      return ev[i].metrics;
    }
  }
}

double Seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (v == nullptr) {
      std::fprintf(stderr, "usage: kv-state-bench [--model PATH] [--tokens N] [--rounds R] [--threads T] "
                           "[--kv-type f32|f16|q8_0] [--dir DIR] [--variant V]\n");
      return 2;
    }
    ++i;
    if (a == "--model") o.model = v;
    else if (a == "--tokens") o.tokens = std::atoi(v);
    else if (a == "--rounds") o.rounds = std::atoi(v);
    else if (a == "--threads") o.threads = std::atoi(v);
    else if (a == "--dir") o.dir = v;
    else if (a == "--variant") o.variant = std::atoi(v);
    else if (a == "--kv-type") o.kv_type = !std::strcmp(v, "f32") ? LLM_KV_F32 : !std::strcmp(v, "q8_0") ? LLM_KV_Q8_0 : LLM_KV_F16;
    else { std::fprintf(stderr, "kv-state-bench: unknown option %s\n", a.c_str()); return 2; }
  }
  if (o.tokens < 32 || o.rounds < 1) return 2;
  const std::string base = o.dir + "/llmrt-kv-bench-" + std::to_string(::getpid());
  fs::create_directories(base);
  const int n_blocks = (o.tokens + 16) / 16 + 2;  // one prompt fits; a second one evicts it

  llm_ctx* probe = Make(o, n_blocks, 0, "");
  llm_model_info info{};
  info.struct_size = sizeof info;
  llm_model_get_info(probe, &info);
  llm_ctx_destroy(probe);

  std::vector<double> cold, restored, host, disk, save_mbs, load_mbs, bytes_per_tok;
  int32_t cached_restored = 0, cached_host = 0, cached_disk = 0;
  for (int round = 0; round < o.rounds; ++round) {
    const std::vector<llm_token> prompt = Prompt(o.tokens, o.variant + 2 * round, info.n_vocab);
    const std::vector<llm_token> other = Prompt(o.tokens, o.variant + 2 * round + 1, info.n_vocab);
    const std::string file = base + "/conv.llmkv";
    const std::string tier = base + "/tier" + std::to_string(round);
    {  // cold, save; host tier (evicted by `other`, then back)
      llm_ctx* a = Make(o, n_blocks, uint64_t{4} << 30, tier);
      cold.push_back(Run(a, prompt).ttft_ms);
      int32_t n = 0;
      auto t0 = Clock::now();
      if (llm_status st = llm_kv_export_file(a, prompt.data(), static_cast<int32_t>(prompt.size()), 0, file.c_str(), &n);
          st != LLM_OK)
        Die("llm_kv_export_file", st);
      const double s = Seconds(t0);
      const double bytes = static_cast<double>(fs::file_size(file));
      save_mbs.push_back(bytes / s / 1e6);
      bytes_per_tok.push_back(n > 0 ? bytes / n : 0);
      {  // load, restored: right after the save, as a caller restoring it would
        // (later, the tier files `a` writes at destroy would compete with the
        // read for the disk and the page cache)
        llm_ctx* b = Make(o, n_blocks, 0, "");
        int32_t nb = 0;
        auto t1 = Clock::now();
        if (llm_status st = llm_kv_import_file(b, 0, file.c_str(), &nb); st != LLM_OK) Die("llm_kv_import_file", st);
        load_mbs.push_back(bytes / Seconds(t1) / 1e6);
        const llm_metrics m = Run(b, prompt);
        restored.push_back(m.ttft_ms);
        cached_restored = m.cached_prompt_tokens;
        llm_ctx_destroy(b);
      }
      Run(a, other);  // evicts `prompt` down to the host tier
      const llm_metrics m = Run(a, prompt);
      host.push_back(m.ttft_ms);
      cached_host = m.cached_prompt_tokens;
      llm_ctx_destroy(a);  // the pool's and the host tier's blocks go to disk
    }
    {  // disk: a new context on the directory the first one filled
      llm_ctx* c = Make(o, n_blocks, 0, tier);
      const llm_metrics m = Run(c, prompt);
      disk.push_back(m.ttft_ms);
      cached_disk = m.cached_prompt_tokens;
      llm_ctx_destroy(c);
    }
  }
  fs::remove_all(base);

  const double c = Median(cold);
  std::printf("model %s, %d-token prompt, kv_type %d, %d round(s), medians\n",
              o.model.empty() ? "(built-in)" : o.model.c_str(), o.tokens, o.kv_type, o.rounds);
  std::printf("| case | TTFT ms | vs cold | cached tokens |\n| --- | --- | --- | --- |\n");
  std::printf("| cold (computed) | %.2f | 1.00 | 0 |\n", c);
  std::printf("| restored from a file | %.2f | %.3f | %d |\n", Median(restored), Median(restored) / c, cached_restored);
  std::printf("| host-memory tier | %.2f | %.3f | %d |\n", Median(host), Median(host) / c, cached_host);
  std::printf("| disk tier, new context | %.2f | %.3f | %d |\n", Median(disk), Median(disk) / c, cached_disk);
  std::printf("save %.1f MB/s, load %.1f MB/s (import, checks included), %.0f bytes per token\n", Median(save_mbs),
              Median(load_mbs), Median(bytes_per_tok));
  return 0;
}
