// Prefill/decode disaggregation (issue 33, docs/DISAGG.md): how fast the KV
// pull moves bytes against a plain memcpy of the same size on this machine,
// and what a transfer costs a request end to end (pull + import vs
// computing the prompt), through the public C API and src/disagg/.
//
//   disagg-bench [--mib N] [--rounds K] [--model PATH] [--prompt-tokens T]
//
// Part 1: a producer's UCX server holding N MiB under a lease, pulled by the
// consumer's PullKv (8 MiB runs), against memcpy of N MiB, K rounds
// alternating; prints MB/s of each and the ratio. UCX_TLS picks the
// transport (default here: tcp, as the tests; try UCX_TLS=sm,tcp).
// Part 2 (with --model): TTFT of a T-token prompt on a consumer context
// that pulls its KV from a producer context, against the same prompt
// computed cold (alternating, K rounds; median of each).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "disagg/lease_table.h"
#include "disagg/transport.h"
#include "llm.h"

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

int TransferVsMemcpy(size_t mib, int rounds) {
  using namespace llm;
  disagg::LeaseTable leases(std::chrono::minutes(5));
  disagg::ServerOptions so;
  so.identity.model_digest = 1;
  so.identity.geometry_digest = 2;
  so.leases = &leases;
  auto server = disagg::StartKvServer(so);
  if (!server.ok()) {
    std::fprintf(stderr, "disagg-bench: %s\n", server.status().message().c_str());
    return 1;
  }
  const size_t bytes = mib << 20;
  std::vector<uint8_t> src(bytes), dst(bytes);
  for (size_t i = 0; i < bytes; ++i) src[i] = uint8_t(i * 131 + 7);
  disagg::PullOptions po;
  po.identity = so.identity;
  std::vector<double> pull_s, copy_s;
  for (int r = 0; r < rounds; ++r) {
    disagg::TransferDescriptor d;
    d.host = "127.0.0.1";
    d.port = (*server)->port();
    d.model_digest = 1;
    d.geometry_digest = 2;
    d.n_tokens = 1;
    d.bytes = bytes;
    d.lease = leases.Add(src, 1);  // (the copy into the lease is not timed)
    auto t0 = Clock::now();
    auto got = disagg::PullKv(d, po);
    pull_s.push_back(Since(t0));
    if (!got.ok() || got->stream != src) {
      std::fprintf(stderr, "disagg-bench: the pull failed: %s\n", got.ok() ? "bytes differ" : got.status().message().c_str());
      return 1;
    }
    t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    copy_s.push_back(Since(t0));
    if (dst[bytes / 2] != src[bytes / 2]) return 1;
  }
  const double mb = double(bytes) / 1e6;
  const double pull = mb / Median(pull_s), copy = mb / Median(copy_s);
  std::printf("transfer %zu MiB (UCX_TLS=%s, %d rounds, median): pull %.0f MB/s, memcpy %.0f MB/s, pull/memcpy %.3f\n",
              mib, std::getenv("UCX_TLS") ? std::getenv("UCX_TLS") : "(default)", rounds, pull, copy, pull / copy);
  return 0;
}

struct Timed {
  double ttft_ms = 0;
  int32_t transferred = 0;
  std::string desc;
};

Timed Run(llm_ctx* ctx, const std::vector<llm_token>& prompt, int max_tokens, const char* desc, int produce) {
  Timed out;
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0.0f;
  llm_request r;
  llm_request_init(&r);
  r.prompt_tokens = prompt.data();
  r.n_prompt_tokens = int32_t(prompt.size());
  r.max_tokens = max_tokens;
  r.ignore_eos = 1;
  r.sampling = &sp;
  r.kv_transfer_desc = desc;
  r.kv_produce = produce;
  const auto t0 = Clock::now();
  llm_request_id id;
  if (llm_submit(ctx, &r, &id) != LLM_OK) {
    std::fprintf(stderr, "disagg-bench: %s\n", llm_last_error());
    std::exit(1);
  }
  bool first = true;
  for (bool done = false; !done;) {
    llm_event ev[8];
    for (auto& e : ev) e.struct_size = sizeof e;
    uint32_t n = 0;
    llm_poll(ctx, ev, 8, &n, 1000);
    for (uint32_t i = 0; i < n; ++i) {
      if (ev[i].type == LLM_EVENT_TOKEN && first) {
        out.ttft_ms = Since(t0) * 1e3;  // submit (pull and import included) to the first token
        first = false;
      }
      if (ev[i].type == LLM_EVENT_FINAL) {
        done = true;
        out.transferred = ev[i].transferred_prompt_tokens;
        if (ev[i].kv_transfer_desc) out.desc = ev[i].kv_transfer_desc;
      }
    }
  }
  return out;
}

llm_ctx* Ctx(const char* model, int role, int threads) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = model;
  p.backend = LLM_BACKEND_CPU;
  p.n_threads = threads;
  p.n_ctx = 4096;
  p.kv_role = role;
  llm_ctx* c = nullptr;
  if (llm_ctx_create(&p, &c) != LLM_OK) {
    std::fprintf(stderr, "disagg-bench: %s\n", llm_last_error());
    std::exit(1);
  }
  return c;
}

int Ttft(const char* model, int n_prompt, int rounds) {
  llm_ctx* prod = Ctx(model, LLM_KV_ROLE_PRODUCER, 1);
  std::vector<double> cold, pulled;
  int32_t transferred = 0;
  for (int r = 0; r < rounds; ++r) {
    std::vector<llm_token> prompt{1};
    for (int i = 1; i < n_prompt; ++i) prompt.push_back((7 * i + 11 + 97 * r) % 250 + 3);
    // Fresh consumer contexts, so neither side finds the prompt cached.
    llm_ctx* a = Ctx(model, LLM_KV_ROLE_CONSUMER, 1);
    llm_ctx* b = Ctx(model, LLM_KV_ROLE_NONE, 1);
    const Timed pre = Run(prod, prompt, 1, nullptr, 1);
    const Timed t_pull = Run(a, prompt, 2, pre.desc.c_str(), 0);
    const Timed t_cold = Run(b, prompt, 2, nullptr, 0);
    pulled.push_back(t_pull.ttft_ms);
    cold.push_back(t_cold.ttft_ms);
    transferred = t_pull.transferred;
    llm_ctx_destroy(a);
    llm_ctx_destroy(b);
  }
  llm_ctx_destroy(prod);
  std::printf("TTFT of a %d-token prompt on one thread (%d rounds, median): computed %.1f ms, pulled (%d tokens "
              "transferred) %.1f ms, ratio %.3f\n",
              n_prompt, rounds, Median(cold), transferred, Median(pulled), Median(pulled) / Median(cold));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 256;
  int rounds = 5, n_prompt = 1024;
  const char* model = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--mib") mib = std::strtoul(argv[i + 1], nullptr, 10);
    else if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (a == "--model") model = argv[i + 1];
    else if (a == "--prompt-tokens") n_prompt = std::atoi(argv[i + 1]);
  }
  setenv("UCX_TLS", "tcp", 0);
  if (!llm::disagg::TransportAvailable()) {
    std::fprintf(stderr, "disagg-bench: built without UCX\n");
    return 1;
  }
  if (int rc = TransferVsMemcpy(mib, rounds); rc != 0) return rc;
  if (model != nullptr) return Ttft(model, n_prompt, rounds);
  return 0;
}
