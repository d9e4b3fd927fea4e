// llm-server: an OpenAI-compatible HTTP server over one llm_ctx.
//
//   llm-server [-m MODEL] [--host 127.0.0.1] [--port 8080] [-t THREADS] [--max-seqs 16] [-c CTX]
//              [--kv-blocks N] [--max-batch-tokens N] [--http-threads N] [--chat-template FILE]
//              [--api-key KEY]... [--api-key-file FILE] [--allowed-host NAME]... [-v]
//   (and llama-server's common flags: options.h)
//
// Endpoints: POST /v1/chat/completions, POST /v1/completions (both with
// "stream": true as server-sent events), GET /v1/models, GET /v1/stats
// (llm_get_stats as JSON; an llmrt extension), GET /metrics (Prometheus) and
// GET /health.
//
// Every HTTP request runs on a worker thread of its own (a connection whose
// request has not fully arrived waits in an epoll gate: connection_gate.h);
// all of them submit
// to the one context, whose engine batches them continuously, and one poller
// thread routes the events back (engine.h). A streaming client that goes
// away has its request cancelled, which frees its KV blocks.
//
// --port 0 binds a free port; the "listening on" line (stdout) names it.
// SIGINT / SIGTERM: stop accepting, cancel what is in flight (streams end with
// an error event), join the workers, destroy the context, exit 0.
#include <httplib.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../chat_prompt.h"
#include "../cli_common.h"
#if LLM_SERVER_GATE
#include "connection_gate.h"
#endif
#include "engine.h"
#include "embeddings_routes.h"
#include "listen_backlog.h"
#include "template_choice.h"
#include "native_routes.h"
#include "options.h"
#include "request_limits.h"
#include "routes.h"

namespace {

constexpr size_t kThreadStackBytes = size_t{8} << 20;

llm_ctx* CreateContext(const server::Options& o) {
  llm_ctx_params p;
  llm_ctx_params_init(&p);
  p.model_path = o.model.empty() ? nullptr : o.model.c_str();
  p.mmproj_path = o.mmproj.empty() ? nullptr : o.mmproj.c_str();
  p.n_threads = o.threads;
  p.max_seqs = o.max_seqs;
  p.n_ctx = o.ctx;
  p.n_kv_blocks = o.kv_blocks;
  p.n_gpu_layers = o.n_gpu_layers;
  p.n_cpu_moe = o.n_cpu_moe;
  p.moe_cache_bytes = static_cast<uint64_t>(std::max(0, o.moe_cache_mib)) << 20;
  p.main_gpu = o.main_gpu;
  std::copy(std::begin(o.tensor_split), std::end(o.tensor_split), p.tensor_split);
  p.max_batch_tokens = o.max_batch_tokens;
  p.kv_type = o.kv_type;
  p.kv_type_v = o.kv_type_v;
  p.kv_host_bytes = o.kv_host_bytes;
  p.kv_disk_dir = o.kv_disk_dir.empty() ? nullptr : o.kv_disk_dir.c_str();
  p.kv_disk_bytes = o.kv_disk_bytes;
  p.kv_role = o.kv_role;
  p.kv_lease_ms = o.kv_lease_ms;
  p.kv_listen_addr = o.kv_listen.empty() ? nullptr : o.kv_listen.c_str();
  llm_ctx* ctx = nullptr;
  if (cli::Failed(llm_ctx_create(&p, &ctx), "llm_ctx_create")) return nullptr;
  // The default context length is no longer than the model was trained for.
  llm_model_info info{};
  info.struct_size = sizeof info;
  if (!o.ctx_given && llm_model_get_info(ctx, &info) == LLM_OK && info.n_ctx_train > 0 &&
      info.n_ctx_train < p.n_ctx) {
    llm_ctx_destroy(ctx);
    p.n_ctx = info.n_ctx_train;
    if (cli::Failed(llm_ctx_create(&p, &ctx), "llm_ctx_create")) return nullptr;
  }
  return ctx;
}

}  // namespace

int main(int argc, char** argv) {
  server::Options opt = server::ParseArgs(argc, argv);

  // Before any thread starts: SIGINT/SIGTERM are taken by sigwait below
  // (every thread inherits the mask), and a write to a closed socket is an
  // error return, not a SIGPIPE.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Request bodies (up to 16 MiB) and the strings made from them are
  // mapped and unmapped, not kept in glibc's heaps: a fixed threshold stops
  // glibc from raising it after the first large free, which left the
  // resident size at its peak after a burst of large requests.
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  // Every thread started from here on (HTTP workers, the gate, the event
  // poller, the library's engine thread) gets kThreadStackBytes of stack
  // whatever `ulimit -s` says. The deepest request the limits admit
  // (request_limits.h: a JSON Schema of 128 levels compiled, tool-call
  // arguments of 64 levels parsed and rendered) was served with 256 KiB.
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) == 0) {
    pthread_attr_setstacksize(&attr, kThreadStackBytes);
    pthread_setattr_default_np(&attr);
    pthread_attr_destroy(&attr);
  }

  std::string template_text;
  if (!opt.chat_template.empty()) {
    std::string problem;
    if (!server::ResolveChatTemplate(opt.chat_template, opt.chat_template_is_file, &template_text, &problem)) {
      std::fprintf(stderr, "llm-server: %s\n", problem.c_str());
      return 2;
    }
  }

  llm_ctx* ctx = CreateContext(opt);
  if (ctx == nullptr) return 1;
  // --alias "a,b,c" (llama-server): every alias names the model, the first
  // in sorted order is its id; --tags are shown beside them.
  const std::vector<std::string> aliases = server::SplitList(opt.alias);
  const std::string name = aliases.empty() ? chat::ModelName(opt.model) : aliases.front();
  chat::Prompter prompter;
  std::string error;
  if (!prompter.Init(ctx, template_text, &error)) {
    std::fprintf(stderr, "llm-server: %s\n", error.c_str());
    llm_ctx_destroy(ctx);
    return 1;
  }
  if (prompter.fallback())
    std::fprintf(stderr,
                 "llm-server: %s has no chat template; /v1/chat/completions renders a plain "
                 "'role: content' transcript (--chat-template FILE supplies one)\n",
                 name.c_str());

  server::AccessPolicy access;
  access.api_keys = opt.api_keys;
  access.allowed_hosts = opt.allowed_hosts;
  access.cors_origins = opt.cors_origins;
  access.loopback_bind = server::IsLoopbackAddress(opt.host);
  if (!opt.api_key_file.empty() && !server::ReadKeyFile(opt.api_key_file, &access.api_keys, &error)) {
    std::fprintf(stderr, "llm-server: %s\n", error.c_str());
    llm_ctx_destroy(ctx);
    return 2;
  }
  for (const std::string& k : access.api_keys) {
    if (k.empty()) {
      std::fprintf(stderr, "llm-server: an API key may not be empty\n");
      llm_ctx_destroy(ctx);
      return 2;
    }
  }
  if (access.api_keys.empty() && !access.loopback_bind)
    std::fprintf(stderr, "llm-server: warning: listening on %s without an API key (--api-key): anyone who reaches it can use it\n",
                 opt.host.c_str());

  server::Engine engine(ctx);
  server::Routes routes(&engine, &prompter, name, opt.verbose);
  routes.set_defaults(opt.defaults);
  routes.set_image_fetch(opt.image_fetch);
  routes.set_labels(aliases, server::SplitList(opt.tags));
  const int http_threads = opt.http_threads > 0 ? opt.http_threads : std::max(8, 4 * opt.max_seqs);
#if LLM_SERVER_GATE
  // Workers serve only connections with bytes to read (connection_gate.h).
  server::GateOptions gate;
  gate.workers = http_threads;
  server::GatedServer svr(gate);
#else
  // Without the gate (another cpp-httplib version) each accepted connection
  // takes a worker until it speaks: short timeouts bound how long a silent
  // one holds it.
  httplib::Server svr;
  svr.new_task_queue = [http_threads] { return new httplib::ThreadPool(static_cast<size_t>(http_threads)); };
  svr.set_keep_alive_timeout(2);
  svr.set_read_timeout(2, 0);
#endif
  svr.set_payload_max_length(server::kMaxBodyBytes);
  server::InstallAccessCheck(&svr, std::move(access));
  server::SlotStore slot_store;
  if (!opt.slot_save_path.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(opt.slot_save_path, ec);
    if (ec || !std::filesystem::is_directory(opt.slot_save_path)) {
      std::fprintf(stderr, "llm-server: --slot-save-path %s is not a directory it can make\n", opt.slot_save_path.c_str());
      return 2;
    }
    routes.set_slots(&slot_store, opt.max_seqs);
  }
  routes.Register(&svr);
  {
    llm_model_info mi{};
    mi.struct_size = sizeof mi;
    llm_model_get_info(ctx, &mi);
    server::NativeInfo native;
    native.ctx = ctx;
    native.prompter = &prompter;
    native.model_name = name;
    native.n_ctx = mi.n_ctx;
    native.total_slots = opt.max_seqs;
    native.model_path = opt.model;
    native.slots = opt.slots;
    native.defaults = opt.defaults;
    server::RegisterNativeRoutes(&svr, std::move(native));
    server::RegisterEmbeddingRoutes(&svr, server::EmbedInfo{ctx, name});
    server::RegisterSlotRoutes(&svr, server::SlotRoutesInfo{ctx, &slot_store, opt.slot_save_path, opt.max_seqs});
  }

  server::ListenBacklog backlog(&svr);  // a burst of connections is queued, not reset (listen_backlog.h)
  int port = opt.port;
  if (port == 0) {
    port = svr.bind_to_any_port(opt.host);
    if (port < 0) port = 0;
  } else if (!svr.bind_to_port(opt.host, port)) {
    port = 0;
  }
  if (port == 0) {
    std::fprintf(stderr, "llm-server: cannot bind %s:%d\n", opt.host.c_str(), opt.port);
    return 1;  // engine's destructor shuts the context down
  }
  if (!backlog.Widen()) std::fprintf(stderr, "llm-server: warning: could not widen the listen backlog\n");
  llm_model_info info{};
  info.struct_size = sizeof info;
  llm_model_get_info(ctx, &info);
  std::printf("llm-server: listening on http://%s:%d (model %s, context %d, %d sequences, %d HTTP threads)\n",
              opt.host.c_str(), port, name.c_str(), info.n_ctx, opt.max_seqs, http_threads);
  std::fflush(stdout);

  std::atomic<bool> listening_ended{false};
  std::thread listener([&] {
    svr.listen_after_bind();
    listening_ended = true;
    kill(getpid(), SIGTERM);  // wakes sigwait if the listener stopped on its own
  });

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "llm-server: %s, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  // In-flight requests end first (cancelled), so the workers waiting on them
  // return and the HTTP server can join them.
  engine.BeginShutdown();
  // Give the streams a moment to send their last (error) event: once the
  // server stops, httplib ends chunked responses without asking them.
  for (int i = 0; i < 300 && (engine.active_streams > 0 || engine.live_requests() > 0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  while (!listening_ended) {
    svr.stop();  // a no-op until listen_after_bind is running
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  listener.join();
  engine.Shutdown();
  std::fprintf(stderr, "llm-server: stopped\n");
  return 0;
}
