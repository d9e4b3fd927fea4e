// llm-disagg-proxy: the routing proxy of prefill/decode disaggregation
// (docs/DISAGG.md). Each /v1/completions, /v1/chat/completions,
// /v1/responses (OpenAI's Responses API) or /v1/messages (Anthropic's
// Messages API) request goes first to a prefill llm-server (--kv-role prefill) as a one-token
// request that keeps its KV, then, with the kv_transfer_params it answered,
// to a decode llm-server (--kv-role decode), whose answer (streamed or not)
// goes back to the client unchanged. An OpenAI client points at the proxy
// as at one server.
//
//   llm-disagg-proxy --prefill http://127.0.0.1:8001 --decode http://127.0.0.1:8002 [--host H] [--port P]
//
// --prefill and --decode may each be given several times: each request goes
// to the server of its kind with the fewest of the proxy's requests in
// flight, ties in turn (balancer.h), and to the next one when that one
// cannot be connected to. A prefill request that fails on every prefill
// server: the request goes to a decode server as it came (it computes the
// prompt). No decode server connectable: 502 with an OpenAI-shaped error
// (code "decode_unavailable"). An upstream connection closed or reset before
// any answer is retried once on a new connection (upstream.h); a streamed
// answer whose decode server fails mid-stream ends with an error event
// (stream_error.h). /metrics counts all of these; GET /v1/models and /health
// are the first decode server's.
#include <httplib.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "listen_backlog.h"
#include "proxy/balancer.h"
#include "proxy/routing.h"
#include "proxy/stream_error.h"
#include "proxy/upstream.h"

namespace {

using proxy::json;

struct Config {
  std::vector<proxy::Upstream> prefill, decode;
  std::string host = "127.0.0.1";
  int port = 8000;
  int timeout_s = 600;
  int threads = 64;  // connections served at once (each holds one during its upstream calls)
};

struct Counters {
  std::atomic<uint64_t> requests{0}, split{0}, prefill_failures{0}, decode_failures{0};
  std::atomic<uint64_t> prefill_retries{0}, decode_retries{0}, streams_broken{0};
};

[[noreturn]] void Usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: llm-disagg-proxy --prefill URL... --decode URL... [--host H] [--port P] [--timeout S]\n"
               "  --prefill URL   an llm-server started with --kv-role prefill (http://host:port); repeatable\n"
               "  --decode URL    an llm-server started with --kv-role decode; repeatable\n"
               "  --host H        address to listen on (default 127.0.0.1)\n"
               "  --port P        port (default 8000; 0: any free one, printed)\n"
               "  --timeout S     upstream read timeout in seconds (default 600)\n"
               "  --threads N     connections served at once (default 64)\n");
  std::exit(code);
}

Config ParseArgs(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") Usage(0);
    if (i + 1 >= argc) Usage(2);
    const std::string v = argv[++i];
    proxy::Upstream u;
    if (a == "--prefill" || a == "--decode") {
      if (!proxy::ParseUpstream(v, &u)) Usage(2);
      (a == "--prefill" ? c.prefill : c.decode).push_back(u);
    } else if (a == "--host") c.host = v;
    else if (a == "--port") c.port = std::atoi(v.c_str());
    else if (a == "--timeout") c.timeout_s = std::atoi(v.c_str());
    else if (a == "--threads") c.threads = std::atoi(v.c_str());
    else Usage(2);
  }
  if (c.prefill.empty() || c.decode.empty() || c.prefill.size() > 256 || c.decode.size() > 256 || c.port < 0 || c.port > 65535 || c.timeout_s <= 0 || c.threads < 1 || c.threads > 4096)
    Usage(2);
  return c;
}

void SendError(httplib::Response& res, int status, const std::string& message, const char* code) {
  json e = {{"error", {{"message", message}, {"type", status >= 500 ? "server_error" : "invalid_request_error"},
                       {"param", nullptr}, {"code", code}}}};
  res.status = status;
  res.set_content(e.dump(), "application/json");
}

struct Servers {
  proxy::Balancer prefill, decode;
};

// A retried upstream call (upstream.h): counted and logged.
void NoteRetry(std::atomic<uint64_t>& counter, const char* kind, const proxy::Upstream& u, const std::string& why) {
  ++counter;
  std::fprintf(stderr, "llm-disagg-proxy: %s server %s closed the connection before answering (%s); sent again\n",
               kind, u.base().c_str(), why.c_str());
}

void Generate(const Config& cfg, Servers& up, Counters& n, proxy::Api api, const httplib::Request& req,
              httplib::Response& res) {
  ++n.requests;
  json body;
  try {
    body = json::parse(req.body);
  } catch (const json::exception& e) {
    return SendError(res, 400, std::string("the body is not JSON: ") + e.what(), "invalid_json");
  }
  const std::string auth = req.get_header_value("Authorization");
  json prefill_answer = nullptr;
  if (proxy::Splittable(body)) {
    const std::string prefill_body = proxy::PrefillBody(body, api).dump();
    proxy::CallResult p;
    std::string tried;
    for (size_t i : up.prefill.Order()) {
      auto busy = up.prefill.Begin(i);
      p = proxy::Call(up.prefill.at(i), req.path, prefill_body, auth, cfg.timeout_s);
      if (p.retried) NoteRetry(n.prefill_retries, "prefill", up.prefill.at(i), p.first_error);
      if (!tried.empty()) tried += ", ";
      tried += up.prefill.at(i).base();
      if (!p.unconnected) break;  // answered, or failed after connecting: no retry
    }
    if (p.reached && p.status == 200) {
      // Split only when the answer carries the transfer (a server without
      // the prefill role for this route answers without it).
      try {
        json a = json::parse(p.body);
        if (a.is_object() && a.contains("kv_transfer_params") && a["kv_transfer_params"].is_object()) {
          prefill_answer = std::move(a);
          ++n.split;
        }
      } catch (const json::exception&) {
      }
    } else if (p.reached && p.status >= 400 && p.status < 500) {
      // The request's own fault: the client hears it as the prefill server said it.
      res.status = p.status;
      res.set_content(p.body, p.content_type.empty() ? "application/json" : p.content_type);
      return;
    }
    if (prefill_answer.is_null()) {
      ++n.prefill_failures;
      std::fprintf(stderr, "llm-disagg-proxy: prefill server %s failed (%s); the decode server computes the prompt\n",
                   tried.c_str(),
                   p.reached ? ("HTTP " + std::to_string(p.status) + (p.status == 200 ? ", no kv_transfer_params" : ""))
                                   .c_str()
                             : p.error.c_str());
    }
  }
  const std::string decode_body = proxy::DecodeBody(body, prefill_answer).dump();
  const bool stream = body.is_object() && body.value("stream", false);
  std::string tried, error;
  for (size_t i : up.decode.Order()) {
    const proxy::Upstream& d = up.decode.at(i);
    if (!tried.empty()) tried += ", ";
    tried += d.base();
    auto busy = up.decode.Begin(i);
    if (!stream) {
      proxy::CallResult r = proxy::Call(d, req.path, decode_body, auth, cfg.timeout_s);
      if (r.retried) NoteRetry(n.decode_retries, "decode", d, r.first_error);
      if (r.reached) {
        res.status = r.status;
        res.set_content(r.body, r.content_type.empty() ? "application/json" : r.content_type);
        return;
      }
      error = r.error;
      if (!r.unconnected) break;
      continue;
    }
    auto call = std::make_shared<proxy::StreamCall>(d, req.path, decode_body, auth, cfg.timeout_s);
    const int status = call->WaitHeaders();
    if (call->retried()) NoteRetry(n.decode_retries, "decode", d, call->first_error());
    if (status == 0) {
      error = call->error();
      if (!call->unconnected()) break;
      continue;
    }
    res.status = status;
    const std::string type = call->content_type().empty() ? "text/event-stream" : call->content_type();
    res.set_header("Cache-Control", "no-cache");
    // The server stays counted busy until the stream has been relayed.
    std::shared_ptr<proxy::Balancer::InFlight> held(std::move(busy));
    res.set_chunked_content_provider(type, [call, held, api, &n, base = d.base()](size_t, httplib::DataSink& sink) {
      std::string chunk;
      if (!call->Next(&chunk)) {
        // Not retried: part of the answer is the client's already.
        if (const std::string why = call->broken(); !why.empty()) {
          ++n.streams_broken;
          const std::string message = "llm-disagg-proxy: the decode server " + base +
                                      " failed mid-stream (" + why + "); the answer is incomplete";
          std::fprintf(stderr, "%s\n", message.c_str());
          const std::string event = proxy::StreamErrorEvent(api, message);
          sink.write(event.data(), event.size());
        }
        sink.done();
        return true;
      }
      return sink.write(chunk.data(), chunk.size());
    });
    return;
  }
  ++n.decode_failures;
  SendError(res, 502, "llm-disagg-proxy: no decode server answered (" + tried + ": " + error + ")",
            "decode_unavailable");
}

}  // namespace

int main(int argc, char** argv) {
  const Config cfg = ParseArgs(argc, argv);
  Counters counters;
  Servers up{proxy::Balancer(cfg.prefill), proxy::Balancer(cfg.decode)};
  httplib::Server svr;
  svr.new_task_queue = [n = cfg.threads] { return new httplib::ThreadPool(static_cast<size_t>(n)); };
  // A burst of clients connecting at once is queued, not reset (listen_backlog.h).
  server::ListenBacklog backlog(&svr);
  for (const proxy::Route& r : proxy::kRoutes) {
    svr.Post(r.path, [&, api = r.api](const httplib::Request& req, httplib::Response& res) {
      Generate(cfg, up, counters, api, req, res);
    });
  }
  auto forward_get = [&](const httplib::Request& req, httplib::Response& res) {
    httplib::Client cli(cfg.decode[0].host, cfg.decode[0].port);
    cli.set_connection_timeout(5, 0);
    httplib::Result r = cli.Get(req.path.c_str());
    if (!r) return SendError(res, 502, "llm-disagg-proxy: the decode server did not answer", "decode_unavailable");
    res.status = r->status;
    res.set_content(r->body, r->get_header_value("Content-Type"));
  };
  svr.Get("/v1/models", forward_get);
  svr.Get("/health", forward_get);
  svr.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    std::string m;
    auto counter = [&m](const char* name, const char* help, uint64_t v) {
      m += std::string("# HELP llmrt_proxy_") + name + " " + help + "\n# TYPE llmrt_proxy_" + name + " counter\n" +
           "llmrt_proxy_" + name + " " + std::to_string(v) + "\n";
    };
    counter("requests_total", "Generation requests received.", counters.requests.load());
    counter("split_total", "Requests prefilled on the prefill server.", counters.split.load());
    counter("prefill_failures_total", "Requests whose prefill failed (decoded with the prompt computed there).",
            counters.prefill_failures.load());
    counter("decode_failures_total", "Requests whose decode server did not answer (502).",
            counters.decode_failures.load());
    counter("prefill_retries_total", "Prefill calls sent again after their connection closed before an answer.",
            counters.prefill_retries.load());
    counter("decode_retries_total", "Decode calls sent again after their connection closed before an answer.",
            counters.decode_retries.load());
    counter("streams_broken_total", "Streamed answers whose decode server failed mid-stream (ended with an error).",
            counters.streams_broken.load());
    res.set_content(m, "text/plain; version=0.0.4");
  });
  int port = cfg.port;
  if (port == 0) {
    port = svr.bind_to_any_port(cfg.host.c_str());
  } else if (!svr.bind_to_port(cfg.host.c_str(), port)) {
    port = -1;
  }
  if (port < 0) {
    std::fprintf(stderr, "llm-disagg-proxy: cannot listen on %s:%d\n", cfg.host.c_str(), cfg.port);
    return 1;
  }
  if (!backlog.Widen()) std::fprintf(stderr, "llm-disagg-proxy: warning: could not widen the listen backlog\n");
  auto list = [](const std::vector<proxy::Upstream>& v) {
    std::string s;
    for (const proxy::Upstream& u : v) {
      if (!s.empty()) s += ' ';
      s += u.base();
    }
    return s;
  };
  std::printf("llm-disagg-proxy: listening on http://%s:%d (prefill %s, decode %s)\n", cfg.host.c_str(), port,
              list(cfg.prefill).c_str(), list(cfg.decode).c_str());
  std::fflush(stdout);
  static httplib::Server* s_svr = &svr;
  std::signal(SIGTERM, [](int) { s_svr->stop(); });
  std::signal(SIGINT, [](int) { s_svr->stop(); });
  svr.listen_after_bind();
  return 0;
}
