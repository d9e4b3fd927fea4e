// llm-bench: throughput and latency through the public C API, engine included.
//
//   llm-bench [-m MODEL] [-t THREADS] [--mode offline|serving|micro] [options] [--json]
//
// offline  N requests submitted at once (random prompts of --input-len tokens,
//          --output-len generated; "A:B" draws uniformly from [A, B]), or the
//          prompts of a JSONL file (--prompts FILE, one {"prompt": "...",
//          "max_tokens": N} per line). --compare also runs the same requests
//          one at a time in this process and prints the speed-up;
//          --rounds K repeats both runs K times, alternating which goes
//          first, and reports the median round's speed-up and the ratio of
//          each side's fastest run (a VM's speed drifts by tens of percent
//          within seconds, and memory-bound single-stream decode drifts more
//          than compute-bound batches).
// serving  the same requests arriving as a Poisson process at --rate req/s.
// micro    single-stream decode, 128-token prefill and a 16-stream batch.
// Reports output and total tok/s, TTFT and TPOT p50/p90/p99, KV utilisation,
// preemptions and prefix-cache hits; --json prints one JSON object instead.
// On Linux each run also reports the host's steal: the share of this
// machine's CPU time that the hypervisor gave to other guests while the run
// lasted (from /proc/stat). A run with steal was slowed by its neighbours.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "llm.h"

namespace {

using Clock = std::chrono::steady_clock;

void Die(llm_status s, const char* what) {
  std::fprintf(stderr, "%s: %s: %s\n", what, llm_status_str(s), llm_last_error());
  std::exit(1);
}

struct Range {
  int lo = 0, hi = 0;
  int Draw(std::mt19937& rng) const { return lo + static_cast<int>(rng() % static_cast<uint32_t>(hi - lo + 1)); }
};

Range ParseRange(const char* s) {
  Range r;
  if (std::sscanf(s, "%d:%d", &r.lo, &r.hi) != 2) r.lo = r.hi = std::atoi(s);
  if (r.lo < 1 || r.hi < r.lo) {
    std::fprintf(stderr, "bad range '%s'\n", s);
    std::exit(2);
  }
  return r;
}

struct Job {
  std::vector<llm_token> tokens;  // used when text is empty
  std::string text;
  int max_tokens = 0;
};

// A tiny reader for {"prompt": "...", "max_tokens": N} lines (string escapes
// \" \\ \n \t \uXXXX for ASCII only).
bool ParseJsonl(const std::string& line, Job* job) {
  auto key = line.find("\"prompt\"");
  if (key == std::string::npos) return false;
  size_t i = line.find('"', line.find(':', key) + 1);
  if (i == std::string::npos) return false;
  std::string s;
  for (++i; i < line.size() && line[i] != '"'; ++i) {
    if (line[i] == '\\' && i + 1 < line.size()) {
      char c = line[++i];
      if (c == 'n') s += '\n';
      else if (c == 't') s += '\t';
      else if (c == 'u' && i + 4 < line.size()) {
        s += static_cast<char>(std::strtol(line.substr(i + 1, 4).c_str(), nullptr, 16));
        i += 4;
      } else s += c;
    } else {
      s += line[i];
    }
  }
  job->text = s;
  auto mt = line.find("\"max_tokens\"");
  job->max_tokens = mt == std::string::npos ? 128 : std::atoi(line.c_str() + line.find(':', mt) + 1);
  return true;
}

struct Result {
  double wall_s = 0;
  double steal = -1;  // share of CPU time stolen by the host during the run; < 0: unknown
  int64_t prompt_tokens = 0, output_tokens = 0;
  std::vector<double> ttft_ms, tpot_ms;
  llm_stats stats{};
};

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p / 100.0 * v.size())) - 1;
  return v[std::min(i, v.size() - 1)];
}

// Steal and total CPU time so far, in clock ticks, from /proc/stat's "cpu"
// line (user nice system idle iowait irq softirq steal ...); false where it
// cannot be read.
bool CpuTicks(uint64_t* steal, uint64_t* total) {
  std::ifstream f("/proc/stat");
  std::string cpu;
  if (!(f >> cpu) || cpu != "cpu") return false;
  uint64_t v[8];
  for (uint64_t& x : v)
    if (!(f >> x)) return false;
  *steal = v[7];
  *total = 0;
  for (uint64_t x : v) *total += x;
  return true;
}

// Runs `jobs` on ctx. rate > 0: Poisson arrivals; sequential: one at a time.
Result Run(llm_ctx* ctx, const std::vector<Job>& jobs, double rate, bool sequential, uint32_t seed) {
  llm_sampling_params sp;
  llm_sampling_params_init(&sp);
  sp.temperature = 0;
  std::mt19937 rng(seed);
  std::exponential_distribution<double> gap(rate > 0 ? rate : 1.0);
  Result res;
  size_t next = 0, finals = 0;
  auto t0 = Clock::now();
  double next_arrival = 0;
  std::vector<llm_event> ev(256);
  uint64_t steal0 = 0, total0 = 0;
  const bool ticks = CpuTicks(&steal0, &total0);
  while (finals < jobs.size()) {
    // Submit whatever is due.
    const double now = std::chrono::duration<double>(Clock::now() - t0).count();
    while (next < jobs.size() && (!sequential || next == finals) && (rate <= 0 || now >= next_arrival)) {
      const Job& j = jobs[next];
      llm_request r;
      llm_request_init(&r);
      if (j.text.empty()) {
        r.prompt_tokens = j.tokens.data();
        r.n_prompt_tokens = static_cast<int32_t>(j.tokens.size());
      } else {
        r.prompt = j.text.c_str();
      }
      r.max_tokens = j.max_tokens;
      r.ignore_eos = 1;
      r.sampling = &sp;
      llm_request_id id;
      llm_status s = llm_submit(ctx, &r, &id);
      if (s == LLM_ERR_BUSY) break;  // poll, then retry
      if (s != LLM_OK) Die(s, "llm_submit");
      ++next;
      if (rate > 0) next_arrival += gap(rng);
    }
    uint32_t n = 0;
    ev[0].struct_size = sizeof(llm_event);
    int32_t wait_ms = 50;
    if (rate > 0 && next < jobs.size()) wait_ms = std::max(0, static_cast<int32_t>((next_arrival - now) * 1000));
    llm_status s = llm_poll(ctx, ev.data(), static_cast<uint32_t>(ev.size()), &n, std::min(wait_ms, 50));
    if (s != LLM_OK) Die(s, "llm_poll");
    for (uint32_t k = 0; k < n; ++k) {
      if (ev[k].type != LLM_EVENT_FINAL) continue;
      const llm_metrics& m = ev[k].metrics;
      ++finals;
      res.prompt_tokens += m.prompt_tokens;
      res.output_tokens += m.generated_tokens;
      res.ttft_ms.push_back(m.ttft_ms);
      if (m.generated_tokens > 1) res.tpot_ms.push_back(m.tpot_ms);
    }
  }
  res.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (uint64_t steal1 = 0, total1 = 0; ticks && CpuTicks(&steal1, &total1) && total1 > total0)
    res.steal = static_cast<double>(steal1 - steal0) / static_cast<double>(total1 - total0);
  res.stats.struct_size = sizeof res.stats;
  llm_get_stats(ctx, &res.stats);
  return res;
}

void Print(const char* name, const Result& r, bool json) {
  const double out_tps = r.output_tokens / r.wall_s, tot_tps = (r.output_tokens + r.prompt_tokens) / r.wall_s;
  const double hit = r.stats.prefix_cache_queried_tokens
                         ? static_cast<double>(r.stats.prefix_cache_hit_tokens) / r.stats.prefix_cache_queried_tokens
                         : 0.0;
  if (json) {
    char steal[32] = "null";  // unknown: not Linux, or the run was shorter than a clock tick
    if (r.steal >= 0) std::snprintf(steal, sizeof steal, "%.4f", r.steal);
    std::printf(
        "\"%s\": {\"requests\": %zu, \"wall_s\": %.4f, \"prompt_tokens\": %lld, \"output_tokens\": %lld, "
        "\"output_tok_s\": %.1f, \"total_tok_s\": %.1f, \"ttft_ms\": {\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f}, "
        "\"tpot_ms\": {\"p50\": %.4f, \"p90\": %.4f, \"p99\": %.4f}, \"kv_utilization\": %.4f, \"preemptions\": %llu, "
        "\"prefix_cache_hit_rate\": %.4f, \"host_steal\": %s}",
        name, r.ttft_ms.size(), r.wall_s, static_cast<long long>(r.prompt_tokens),
        static_cast<long long>(r.output_tokens), out_tps, tot_tps, Pct(r.ttft_ms, 50), Pct(r.ttft_ms, 90),
        Pct(r.ttft_ms, 99), Pct(r.tpot_ms, 50), Pct(r.tpot_ms, 90), Pct(r.tpot_ms, 99), r.stats.kv_utilization,
        static_cast<unsigned long long>(r.stats.preemptions), hit, steal);
    return;
  }
  std::printf("%-11s %5zu req %8.3f s | out %9.0f tok/s | total %9.0f tok/s | TTFT ms p50 %8.2f p90 %8.2f p99 %8.2f"
              " | TPOT ms p50 %6.3f p90 %6.3f p99 %6.3f | KV util %5.1f%% | preempt %llu | cache hit %4.1f%%",
              name, r.ttft_ms.size(), r.wall_s, out_tps, tot_tps, Pct(r.ttft_ms, 50), Pct(r.ttft_ms, 90),
              Pct(r.ttft_ms, 99), Pct(r.tpot_ms, 50), Pct(r.tpot_ms, 90), Pct(r.tpot_ms, 99),
              100 * r.stats.kv_utilization, static_cast<unsigned long long>(r.stats.preemptions), 100 * hit);
  if (r.steal >= 0) std::printf(" | steal %4.1f%%", 100 * r.steal);
  std::printf("\n");
}

llm_ctx* Create(llm_ctx_params p) {
  llm_ctx* ctx = nullptr;
  if (llm_status s = llm_ctx_create(&p, &ctx); s != LLM_OK) Die(s, "llm_ctx_create");
  return ctx;
}

}  // namespace

int main(int argc, char** argv) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.n_threads = 2;
  std::string mode = "offline", prompts_file;
  int n_requests = 64;
  Range in_len{16, 256}, out_len{16, 128};
  double rate = 0;
  bool json = false, compare = false;
  int rounds = 1;
  uint32_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto need = [&] {
      if (!v) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
      ++i;
      return v;
    };
    if (a == "-m") p.model_path = need();
    else if (a == "-t") p.n_threads = std::atoi(need());
    else if (a == "--mode") mode = need();
    else if (a == "-n") n_requests = std::atoi(need());
    else if (a == "--input-len") in_len = ParseRange(need());
    else if (a == "--output-len") out_len = ParseRange(need());
    else if (a == "--prompts") prompts_file = need();
    else if (a == "--rate") rate = std::atof(need());
    else if (a == "--max-seqs") p.max_seqs = std::atoi(need());
    else if (a == "--max-batch-tokens") p.max_batch_tokens = std::atoi(need());
    else if (a == "--kv-blocks") p.n_kv_blocks = std::atoi(need());
    else if (a == "--seed") seed = static_cast<uint32_t>(std::atoi(need()));
    else if (a == "--compare") compare = true;
    else if (a == "--rounds") rounds = std::max(1, std::atoi(need()));
    else if (a == "--json") json = true;
    else {
      std::fprintf(stderr,
                   "usage: llm-bench [-m MODEL] [-t N] [--mode offline|serving|micro] [-n N] [--input-len A[:B]]\n"
                   "                 [--output-len A[:B]] [--prompts FILE.jsonl] [--rate R] [--compare [--rounds K]]\n"
                   "                 [--max-seqs N] [--max-batch-tokens N] [--kv-blocks N] [--seed S] [--json]\n");
      return 2;
    }
  }

  // ---- the workload
  std::vector<Job> jobs;
  std::mt19937 rng(seed);
  if (!prompts_file.empty()) {
    std::ifstream in(prompts_file);
    std::string line;
    while (std::getline(in, line)) {
      Job j;
      if (ParseJsonl(line, &j)) jobs.push_back(std::move(j));
    }
    if (jobs.empty()) {
      std::fprintf(stderr, "no prompts in %s\n", prompts_file.c_str());
      return 1;
    }
  } else {
    llm_ctx* probe = Create(p);
    llm_model_info info{};
    info.struct_size = sizeof info;
    llm_model_get_info(probe, &info);
    llm_ctx_destroy(probe);
    for (int i = 0; i < n_requests; ++i) {
      Job j;
      const int len = in_len.Draw(rng);
      j.tokens.push_back(info.bos);
      for (int k = 1; k < len; ++k) j.tokens.push_back(3 + static_cast<int32_t>(rng() % (info.n_vocab - 3)));
      j.max_tokens = out_len.Draw(rng);
      jobs.push_back(std::move(j));
    }
  }

  if (json) std::printf("{\"mode\": \"%s\", \"threads\": %d, ", mode.c_str(), p.n_threads);
  if (mode == "micro") {
    // Single stream: decode rate from TPOT, prefill rate from TTFT.
    llm_ctx* ctx = Create(p);
    std::vector<Job> one(1);
    one[0].text = "Once upon a time";
    one[0].max_tokens = 256;
    Result d = Run(ctx, one, 0, false, seed);
    one[0].text.clear();
    one[0].tokens.assign(1, 1);
    for (int k = 1; k < 128; ++k) one[0].tokens.push_back(3 + (k * 37) % 509);
    one[0].max_tokens = 1;
    Result pf = Run(ctx, one, 0, false, seed);
    llm_ctx_destroy(ctx);
    const double dec = 1000.0 / d.tpot_ms[0], pre = 128 * 1000.0 / pf.ttft_ms[0];
    if (json) std::printf("\"decode_tok_s\": %.1f, \"prefill_tok_s\": %.1f}\n", dec, pre);
    else std::printf("decode (1 stream, 256 tokens): %.0f tok/s\nprefill (128-token prompt): %.0f tok/s\n", dec, pre);
    return 0;
  }
  if (mode != "offline" && mode != "serving") {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  if (mode == "serving" && rate <= 0) rate = 20;
  if (!compare || mode != "offline") rounds = 1;
  auto run = [&](bool sequential) {
    llm_ctx* ctx = Create(p);
    Result r = Run(ctx, jobs, mode == "serving" && !sequential ? rate : 0, sequential, seed);
    llm_ctx_destroy(ctx);
    return r;
  };
  auto out_tps = [](const Result& r) { return r.output_tokens / r.wall_s; };
  std::vector<double> speedups;
  double best_batched = 0, best_seq = 0;  // each side's fastest run (output tok/s)
  for (int k = 0; k < rounds; ++k) {
    Result batched, seq;
    if (k % 2 == 0) {
      batched = run(false);
      if (compare) seq = run(true);
    } else {
      seq = run(true);
      batched = run(false);
    }
    const bool last = k == rounds - 1;
    if (json && last) {
      Print(mode == "serving" ? "serving" : "batched", batched, true);
    } else if (!json) {
      if (rounds > 1) std::printf("round %d/%d\n", k + 1, rounds);
      Print(mode == "serving" ? "serving" : "batched", batched, false);
    }
    if (!compare) break;
    speedups.push_back(out_tps(batched) / out_tps(seq));
    best_batched = std::max(best_batched, out_tps(batched));
    best_seq = std::max(best_seq, out_tps(seq));
    if (json && last) {
      std::printf(", ");
      Print("sequential", seq, true);
    } else if (!json) {
      Print("sequential", seq, false);
      std::printf("continuous batching speed-up (output tok/s): %.2fx\n", speedups.back());
    }
  }
  if (compare) {
    std::vector<double> sorted = speedups;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                            : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
    if (json) {
      std::printf(", \"speedup\": %.3f, \"speedup_fastest_runs\": %.3f, \"speedup_rounds\": [", median,
                  best_batched / best_seq);
      for (size_t i = 0; i < speedups.size(); ++i) std::printf("%s%.3f", i ? ", " : "", speedups[i]);
      std::printf("]");
    } else if (rounds > 1) {
      // The fastest run of each side is the one the host disturbed least.
      std::printf("speed-up over %d rounds: median %.2fx, min %.2fx, max %.2fx; fastest runs %.2fx\n", rounds, median,
                  sorted.front(), sorted.back(), best_batched / best_seq);
    }
  }
  if (json) std::printf("}\n");
  return 0;
}
