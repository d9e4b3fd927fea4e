// Fuzzes llm-server's whole request path: the input is the raw bytes of one
// HTTP request (request line, headers, body), read by cpp-httplib from an
// in-memory stream and dispatched to the server's own routes (the native
// ones of native_routes.cpp too; routes.cpp:
// body reading and its limits, the JSON body's depth and duplicate-key
// checks, the OpenAI request parsers, tools and tool calls, the chat
// template, llm_submit with its constraint compilation) on one context
// serving the bundled model, the way llm-server serves a connection. Accepted
// generations run to their end (the context holds 64 tokens); streaming
// responses are written to the stream like any other.
//
// Checked beyond the sanitizers: every request gets a response, and no
// response is a 500 (a client's input is never an internal error).
#include <httplib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "../../samples/chat_prompt.h"
#include "../../samples/server/engine.h"
#include "../../samples/server/embeddings_routes.h"
#include "../../samples/server/native_routes.h"
#include "../../samples/server/request_limits.h"
#include "../../samples/server/routes.h"
#include "fuzz/common.h"
#include "llm.h"

namespace {

// One connection's bytes: reads come from the input, writes are collected.
class MemoryStream : public httplib::Stream {
 public:
  explicit MemoryStream(std::string_view in) : in_(in) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, in_.size() - at_);
    std::memcpy(ptr, in_.data() + at_, n);
    at_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (out_.size() < (1u << 20)) out_.append(ptr, std::min(size, (size_t{1} << 20) - out_.size()));
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 40000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 8080;
  }
  socket_t socket() const override { return INVALID_SOCKET; }
  const std::string& out() const { return out_; }

 private:
  std::string_view in_;
  size_t at_ = 0;
  std::string out_;
};

// httplib::Server with its one-request entry point opened up.
class FuzzServer : public httplib::Server {
 public:
  bool Serve(httplib::Stream& s) {
    bool closed = false;
    return process_request(s, /*close_connection=*/true, closed, [](httplib::Request&) {});
  }
};

struct World {
  llm_ctx* ctx = nullptr;
  server::Engine* engine = nullptr;
  chat::Prompter prompter;
  server::Routes* routes = nullptr;
  FuzzServer svr;
};

World& TheWorld() {
  static World* w = [] {
    auto* w = new World;
    llm_ctx_params p;
    llm_ctx_params_init(&p);
    const std::string path = llm::fuzz::SourceDir() + "/models/stories260K-f32.gguf";
    p.model_path = path.c_str();
    p.n_threads = 1;
    p.n_ctx = 64;
    p.max_seqs = 4;
    if (llm_ctx_create(&p, &w->ctx) != LLM_OK) {
      std::fprintf(stderr, "fuzz_server: %s\n", llm_last_error());
      std::abort();
    }
    std::string error;
    if (!w->prompter.Init(w->ctx, "", &error)) {
      std::fprintf(stderr, "fuzz_server: %s\n", error.c_str());
      std::abort();
    }
    w->engine = new server::Engine(w->ctx);
    w->routes = new server::Routes(w->engine, &w->prompter, "stories260K-f32", /*log=*/false);
    w->svr.set_payload_max_length(server::kMaxBodyBytes);
    w->routes->Register(&w->svr);
    server::NativeInfo native;
    native.ctx = w->ctx;
    native.prompter = &w->prompter;
    native.model_name = "stories260K-f32";
    native.n_ctx = 64;
    native.total_slots = 4;
    server::RegisterNativeRoutes(&w->svr, native);
    server::RegisterEmbeddingRoutes(&w->svr, server::EmbedInfo{w->ctx, "stories260K-f32"});
    return w;
  }();
  return *w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& w = TheWorld();
  MemoryStream s(std::string_view(reinterpret_cast<const char*>(data), size));
  w.svr.Serve(s);
  const std::string& out = s.out();
  // A request httplib could not even parse gets no response; any other
  // starts with a status line, which must not be a 500 (503, the queue
  // being full, is backpressure, not an error).
  if (out.rfind("HTTP/1.1 500", 0) == 0) {
    std::fprintf(stderr, "fuzz_server: a 5xx answer:\n%.*s\n", static_cast<int>(std::min<size_t>(out.size(), 2000)),
                 out.data());
    std::abort();
  }
  return 0;
}
