#include "metrics.h"

#include <cinttypes>
#include <cstdio>

namespace server {
namespace {

class Writer {
 public:
  void Counter(const char* name, const char* help, uint64_t v) {
    Head(name, help, "counter");
    char buf[64];
    std::snprintf(buf, sizeof buf, "%" PRIu64, v);
    Sample(name, buf);
  }
  void CounterSeconds(const char* name, const char* help, double v) {
    Head(name, help, "counter");
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    Sample(name, buf);
  }
  void Gauge(const char* name, const char* help, double v) {
    Head(name, help, "gauge");
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    Sample(name, buf);
  }
  void Raw(const std::string& s) { out_ += s; }
  std::string Take() { return std::move(out_); }

 private:
  void Head(const char* name, const char* help, const char* type) {
    out_ += std::string("# HELP llmrt_") + name + " " + help + "\n# TYPE llmrt_" + name + " " + type + "\n";
  }
  void Sample(const char* name, const char* value) { out_ += std::string("llmrt_") + name + " " + value + "\n"; }
  std::string out_;
};

// A label value with \, " and newlines escaped, as the format asks.
std::string Label(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string PrometheusMetrics(const Engine& engine, const std::string& model) {
  llm_stats s{};
  s.struct_size = sizeof s;
  if (llm_get_stats(engine.ctx(), &s) != LLM_OK) return "";
  Writer w;
  w.Raw("# HELP llmrt_info The runtime's version, backend and model (value 1).\n# TYPE llmrt_info gauge\n");
  w.Raw(std::string("llmrt_info{version=\"") + Label(llm_version()) + "\",backend=\"" +
        (s.backend == LLM_BACKEND_CUDA ? "cuda" : "cpu") + "\",model=\"" + Label(model) + "\"} 1\n");
  // Counters: monotonic since the context was created.
  w.Counter("requests_submitted_total", "Requests accepted by llm_submit.", s.requests_submitted);
  w.Counter("requests_finished_total", "Requests finished (stop, length, cancel or error).", s.requests_finished);
  w.Counter("prompt_tokens_total", "Prompt tokens computed (prefix-cache hits excluded).", s.prompt_tokens);
  w.Counter("generated_tokens_total", "Tokens generated.", s.generated_tokens);
  w.Counter("engine_steps_total", "Engine steps (batched forward passes).", s.steps);
  w.Counter("prefix_cache_queried_tokens_total", "Prompt tokens looked up in the prefix cache.",
            s.prefix_cache_queried_tokens);
  w.Counter("prefix_cache_hit_tokens_total", "Prompt tokens found in the prefix cache.", s.prefix_cache_hit_tokens);
  w.Counter("preemptions_total", "Sequences preempted (recomputed or swapped).", s.preemptions);
  w.Counter("draft_tokens_proposed_total", "Speculative drafts verified by the target model.",
            s.draft_tokens_proposed);
  w.Counter("draft_tokens_accepted_total", "Speculative drafts accepted.", s.draft_tokens_accepted);
  w.Counter("spec_rounds_total", "Speculative verification passes.", s.spec_rounds);
  w.Counter("swap_outs_total", "Preemptions that swapped the sequence to host memory.", s.swap_outs);
  w.Counter("swap_ins_total", "Swapped-out sequences resumed without recompute.", s.swap_ins);
  w.Counter("swap_blocks_out_total", "KV blocks copied to host memory.", s.swap_blocks_out);
  w.Counter("swap_blocks_in_total", "KV blocks copied back from host memory.", s.swap_blocks_in);
  w.Counter("kv_tier_host_hit_tokens_total", "Prompt tokens copied back from the host-memory KV tier.",
            s.kv_tier_host_hit_tokens);
  w.Counter("kv_tier_disk_hit_tokens_total", "Prompt tokens copied back from the disk KV tier.",
            s.kv_tier_disk_hit_tokens);
  w.Counter("kv_tier_bytes_down_total", "KV bytes copied from the pool into a tier.", s.kv_tier_bytes_down);
  w.Counter("kv_tier_bytes_up_total", "KV bytes copied from a tier back into the pool.", s.kv_tier_bytes_up);
  w.Counter("kv_tier_files_refused_total", "Disk tier files ignored (another model's, or corrupt).",
            s.kv_tier_files_refused);
  w.Counter("kv_imports_refused_total", "KV imports (llm_kv_import) that imported nothing.", s.kv_imports_refused);
  // Prefill/decode disaggregation (--kv-role; docs/DISAGG.md).
  w.Counter("kv_transfers_total", "Decode: KV pulls that imported a prompt's KV.", s.kv_xfer_pulls);
  w.Counter("kv_transfer_fallbacks_total", "Decode: KV pulls that failed (the prompt was computed here).",
            s.kv_xfer_fallbacks);
  w.Counter("kv_transfer_bytes_total", "Decode: KV bytes received.", s.kv_xfer_bytes);
  w.Counter("kv_transfer_tokens_total", "Decode: prompt tokens whose KV arrived by transfer.", s.kv_xfer_tokens);
  w.CounterSeconds("kv_transfer_seconds_total", "Decode: seconds spent pulling and importing KV.", s.kv_xfer_seconds);
  w.Counter("kv_transfers_served_total", "Prefill: transfers served in full.", s.kv_xfer_served);
  w.Counter("kv_transfer_bytes_served_total", "Prefill: KV bytes sent.", s.kv_xfer_bytes_served);
  w.Counter("kv_leases_expired_total", "Prefill: leases dropped before a decode server pulled them.",
            s.kv_leases_expired);
  // Images in the prompt (--mmproj).
  w.Counter("images_encoded_total", "Images run through the vision encoder.", s.images_encoded);
  w.Counter("image_cache_hits_total", "Images whose soft tokens came from the image cache (no encoding).",
            s.image_cache_hits);
  w.Counter("image_tokens_total", "Image positions in the prompts admitted.", s.image_tokens);
  w.CounterSeconds("image_encode_seconds_total", "Seconds spent encoding images.", s.image_encode_seconds);
  w.Counter("http_requests_total", "Generation requests received by the server.", engine.http_requests.load());
  w.Counter("cancelled_on_disconnect_total", "Streaming requests cancelled because the client went away.",
            engine.cancelled_on_disconnect.load());
  // Gauges: the state at this moment, or averages over the uptime.
  w.Gauge("queue_depth", "Requests waiting to be scheduled.", s.queue_depth);
  w.Gauge("running_sequences", "Sequences running.", s.running);
  w.Gauge("waiting_sequences", "Sequences waiting for admission.", s.waiting);
  w.Gauge("kv_blocks", "KV-cache blocks in the pool.", s.kv_blocks_total);
  w.Gauge("kv_blocks_used", "KV-cache blocks referenced by running sequences.", s.kv_blocks_used);
  w.Gauge("kv_blocks_free", "KV-cache blocks free (including cached).", s.kv_blocks_free);
  w.Gauge("kv_blocks_cached", "Free KV-cache blocks still holding a cached prefix.", s.kv_blocks_cached);
  w.Gauge("kv_utilization_ratio", "Time-averaged share of used KV slots that hold tokens (0..1).",
          s.kv_utilization);
  w.Gauge("swap_blocks", "Swap space in KV blocks (0: no swapping).", s.swap_blocks_total);
  w.Gauge("swap_blocks_used", "Swap blocks holding swapped-out sequences.", s.swap_blocks_used);
  w.Gauge("kv_tier_host_bytes", "Bytes held in the host-memory KV tier.", static_cast<double>(s.kv_tier_host_bytes));
  w.Gauge("kv_tier_disk_bytes", "Bytes held in the disk KV tier.", static_cast<double>(s.kv_tier_disk_bytes));
  w.Gauge("kv_tier_disk_on", "1 while the disk KV tier works (0: none, or turned off by an error).",
          s.kv_tier_disk_on);
  w.Gauge("kv_leases_active", "Prefill: KV transfers held for a decode server now.", s.kv_leases_active);
  w.Gauge("kv_lease_bytes", "Prefill: bytes held under leases now.", static_cast<double>(s.kv_lease_bytes));
  w.Gauge("uptime_seconds", "Seconds since the context was created.", s.uptime_s);
  w.Gauge("prompt_tokens_per_second", "Prompt tokens per second of busy engine time.", s.prompt_tokens_per_s);
  w.Gauge("generated_tokens_per_second", "Generated tokens per second of busy engine time.",
          s.generated_tokens_per_s);
  w.Gauge("active_streams", "Streaming responses in progress.", static_cast<double>(engine.active_streams.load()));
  w.Gauge("live_requests", "Requests whose final events are still due.", engine.live_requests());
  return w.Take();
}

}  // namespace server
