#include "options.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <string_view>

#include "../chat_prompt.h"
#include "../cli_common.h"
#include "llm.h"
#include "openai_request.h"
#include "remote_url.h"
#include "../../src/core/defaults.h"

namespace server {
namespace {

[[noreturn]] void Usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: llm-server [options]\n"
               "  -m, --model PATH        GGUF model (default: %s if present,\n"
               "                          else the built-in stories260K); its file stem is the model id\n"
               "  --mmproj PATH           a projector file (GGUF, general.architecture \"clip\") for\n"
               "                          image_url parts (data: URLs with base64 PNG/JPEG)\n"
               "  --allow-remote-images   fetch http:// and https:// image URLs (default: refused); hosts\n"
               "                          whose addresses are loopback, private or link-local are refused\n"
               "                          unless --allowed-image-domains lists them\n"
               "  --allowed-image-domains LIST  fetch only from these hosts (comma-separated exact names or\n"
               "                          addresses, e.g. 127.0.0.1 for a local one); implies\n"
               "                          --allow-remote-images\n"
               "  --remote-image-max-bytes N  a fetched image's largest body (suffix k, m; default 20m,\n"
               "                          at most 64m): longer answers are cut off and refused\n"
               "  --remote-image-timeout S  seconds one fetch may take, redirects (at most 3) and body\n"
               "                          included (default 5)\n"
               "  -a, --alias NAME        the model id to serve instead of the file stem (\"a,b\": several\n"
               "                          names, the first in sorted order is the id)\n"
               "  --tags LIST             comma-separated labels /v1/models shows\n"
               "  --host ADDR             address to bind (default 127.0.0.1)\n"
               "  --port N                port (default 8080; 0 = any free port)\n"
               "  -t, --threads N         CPU compute threads (default: all cores)\n"
               "  --max-seqs N, -np N     sequences batched per step (default 16)\n"
               "  -c, --ctx N             tokens per sequence (default 2048, at most the model's)\n"
               "  --kv-blocks N           KV pool size in 16-token blocks (default: max-seqs full contexts)\n"
               "  -ctk, -ctv TYPE         KV cache element type of K and of V: f32, f16, q8_0, q4_0, fp8_e4m3\n"
               "                          (-ctk alone sets both; f32: CPU only, fp8_e4m3: CUDA sm_89+ only)\n"
               "  --max-batch-tokens N, -b N  token budget per engine step (default 512)\n"
               "  --kv-host-bytes N       keep KV blocks evicted from the prefix cache in N bytes of host\n"
               "                          memory (suffix k, m, g: 512m; default 0: none; CPU backend)\n"
               "  --kv-disk-dir DIR       and below that on disk, in DIR, across restarts (CPU backend)\n"
               "  --kv-disk-bytes N       the disk tier's budget (suffix k, m, g; default 4g)\n"
               "  --kv-role R             prefill/decode disaggregation (docs/DISAGG.md): prefill (answers\n"
               "                          kv_transfer_params.do_remote_decode with a transfer descriptor),\n"
               "                          decode (pulls the KV a request's kv_transfer_params name), both\n"
               "  --kv-listen HOST:PORT   prefill: where UCX serves the KV (default 127.0.0.1:0, any port)\n"
               "  --kv-lease-ms N         prefill: how long unfetched KV is held (default 30000)\n"
               "  -ngl, --n-gpu-layers N  with the CUDA backend: the first N layers on the GPU, the rest on\n"
               "                          the CPU (default all; 0: none, the CPU backend; auto: as many as\n"
               "                          fit the GPUs' free memory with the KV pool, MoE experts to host\n"
               "                          memory first, the CPU backend when none fits; logged to stderr)\n"
               "  --fit on|off            on: -ngl auto unless -ngl is given; off: auto means all\n"
               "  -ts, --tensor-split A,B,...  each GPU's share of those layers (default: by free memory)\n"
               "  -mg, --main-gpu N       run them on GPU N alone (default -1: split over every GPU)\n"
               "  -ncmoe, --n-cpu-moe N   CUDA, Mixture of Experts: the experts of the first N MoE layers\n"
               "                          stay in host memory (run on the CPU or copied to a device cache\n"
               "                          per step, whichever measures cheaper)\n"
               "  -cmoe, --cpu-moe        every MoE layer's experts in host memory (--n-cpu-moe -1)\n"
               "  --moe-cache-mib N       device expert cache for them (default: one layer's experts)\n"
               "  --http-threads N        HTTP worker threads (default 4 x max-seqs, at least 8)\n"
               "  --chat-template T       chat template replacing the model's: chatml, llama3, or\n"
               "                          the Jinja text itself (a file's path is read)\n"
               "  --chat-template-file F  the Jinja template in file F\n"
               "  --api-key KEY           require this key (Authorization: Bearer KEY, or x-api-key) on\n"
               "                          every endpoint but /health; repeat for several\n"
               "  --api-key-file FILE     keys from FILE, one per line\n"
               "  --allowed-host NAME     also answer requests whose Host (or Origin) is NAME; a server\n"
               "                          bound to a loopback address answers local names only\n"
               "  --chat-template-kwargs J  more chat template variables (a JSON object, e.g.\n"
               "                          '{\"enable_thinking\": false}'); a request's chat_template_kwargs win\n"
               "  --reasoning-format F    chat: keep the model's thinking apart from its answer\n"
               "                          (message.reasoning_content): none, deepseek (<think>...</think>),\n"
               "                          harmony (gpt-oss), auto (default: the template's own, if it has\n"
               "                          one); a request's reasoning_format wins\n"
               "  --slot-save-path DIR    POST /slots/{id}?action=save|restore writes and reads the KV of\n"
               "                          the conversation /completion ran with that id_slot in DIR\n"
               "  --cors-origins LIST     origins whose web pages may read answers (comma-separated: host\n"
               "                          names, whole origins, \"localhost\" for the local ones, \"*\" for\n"
               "                          all); default: the local ones and the --allowed-host names\n"
               "  --temp T, --top-k K, --top-p P, --min-p P, --repeat-penalty R, --seed S\n"
               "                          sampling defaults of every request that does not set its own\n"
               "  -n, --n-predict N       max_tokens of a request that sets none (default -1: until EOS or\n"
               "                          the context's end; /v1/completions: 16)\n"
               "  --slots, --no-slots     serve GET /slots (default) or answer it 501\n"
               "  -v, --verbose           log every request on stderr\n"
               "llama-server's flags -ub, -fa, --jinja, --no-jinja, --metrics, --mlock, --no-mmap,\n"
               "--cont-batching, --no-webui, --no-ui, -to, --offline, --kv-unified, --swa-full,\n"
               "--cache-ram, --cache-reuse, --no-warmup are accepted (each changes nothing here: a\n"
               "warning says so), as are --embedding and --reranking; --lora, --context-shift, -sm,\n"
               "-ts, --rope-scaling, --grammar, -md are refused\n"
               "by name.\n",
               chat::kDefaultChatModel);
  std::exit(code);
}

[[noreturn]] void Refuse(const std::string& flag, const char* why) {
  std::fprintf(stderr, "llm-server: %s is not supported: %s\n", flag.c_str(), why);
  std::exit(2);
}

double Real(const std::string& flag, const char* v, double lo, double hi) {
  if (v == nullptr) Usage(2);
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(x >= lo && x <= hi)) {
    std::fprintf(stderr, "llm-server: %s takes a number in [%g, %g] (got %s)\n", flag.c_str(), lo, hi, v);
    std::exit(2);
  }
  return x;
}

int KvType(const std::string& flag, const char* v) {
  if (v == nullptr) Usage(2);
  const std::string_view t(v);
  if (t == "f32") return LLM_KV_F32;
  if (t == "f16") return LLM_KV_F16;
  if (t == "q8_0") return LLM_KV_Q8_0;
  if (t == "q4_0") return LLM_KV_Q4_0;
  Refuse(flag + " " + std::string(t), "the KV cache holds f32, f16, q8_0 or q4_0 here");
}

// A byte count: digits with an optional k, m or g (binary multiples).
unsigned long long Bytes(const std::string& flag, const char* v) {
  if (v == nullptr) Usage(2);
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  unsigned shift = 0;
  if (end != v && *end != '\0' && end[1] == '\0') {
    const char c = static_cast<char>(*end | 0x20);
    shift = c == 'k' ? 10 : c == 'm' ? 20 : c == 'g' ? 30 : 64;
    ++end;
  }
  if (end == v || *end != '\0' || errno != 0 || v[0] == '-' || shift == 64 || (shift > 0 && n > (~0ull >> shift))) {
    std::fprintf(stderr, "llm-server: %s takes a byte count (digits, then k, m or g), not '%s'\n", flag.c_str(), v);
    std::exit(2);
  }
  return n << shift;
}

// llama-server flags that change nothing here, and how many values each takes.
struct Ignored {
  const char* flag;
  int values;
  const char* why;
};
constexpr Ignored kIgnored[] = {
    {"-ub", 1, "the engine sizes its own micro-batches"},
    {"--ubatch-size", 1, "the engine sizes its own micro-batches"},
    {"--jinja", 0, "chat templates are always rendered with Jinja"},
    {"--metrics", 0, "/metrics is always served"},
    {"--mlock", 0, "weights are memory-mapped; the system keeps what is used"},
    {"--no-mmap", 0, "model files are always memory-mapped"},
    {"--cont-batching", 0, "batching is always continuous"},
    {"-cb", 0, "batching is always continuous"},
    {"--no-webui", 0, "there is no web UI"},
    {"-to", 1, "requests end at max_tokens or when the client goes away"},
    {"--timeout", 1, "requests end at max_tokens or when the client goes away"},
    {"--log-disable", 0, "logging is off unless -v"},
    {"--no-warmup", 0, "there is no warm-up run"},
    {"--no-jinja", 0, "chat templates are always rendered with Jinja (as llama.cpp's built-in formats render them)"},
    {"--no-ui", 0, "there is no web UI"},
    {"--offline", 0, "models are never downloaded"},
    {"--kv-unified", 0, "every sequence shares one paged KV pool"},
    {"-kvu", 0, "every sequence shares one paged KV pool"},
    {"--swa-full", 0, "sliding-window layers keep what the window needs"},
    {"--cache-ram", 1, "the prefix cache lives in the KV pool"},
    {"-cram", 1, "the prefix cache lives in the KV pool"},
    {"--cache-reuse", 1, "prompts reuse cached KV blocks by prefix"},
    {"--no-cache-idle-slots", 0, "there are no slots"},
    {"--embedding", 0, "/v1/embeddings and /v1/rerank answer whenever the model makes embeddings"},
    {"--embeddings", 0, "/v1/embeddings and /v1/rerank answer whenever the model makes embeddings"},
    {"--reranking", 0, "/v1/embeddings and /v1/rerank answer whenever the model makes embeddings"},
    {"--rerank", 0, "/v1/embeddings and /v1/rerank answer whenever the model makes embeddings"},
};

// llama-server flags that would change results and are not supported.
struct Refused {
  const char* flag;
  const char* why;
};
constexpr Refused kRefused[] = {
    {"--lora", "LoRA adapters are not supported"},
    {"--lora-scaled", "LoRA adapters are not supported"},
    {"--context-shift", "a full context ends the request (finish_reason length); it is never shifted"},
    {"-sm", "multi-GPU splits are not supported"},
    {"--split-mode", "multi-GPU splits are not supported"},
    {"-ts", "multi-GPU splits are not supported"},
    {"--tensor-split", "multi-GPU splits are not supported"},
    {"--rope-scaling", "RoPE scaling comes from the model file only"},
    {"--rope-freq-base", "RoPE frequencies come from the model file only"},
    {"--grammar", "a server-wide grammar is not supported (send one per request)"},
    {"-md", "a draft model for the server is not supported yet"},
    {"--model-draft", "a draft model for the server is not supported yet"},
};

}  // namespace

std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> out;
  size_t from = 0;
  while (from <= list.size()) {
    const size_t comma = std::min(list.find(',', from), list.size());
    if (comma > from) out.push_back(list.substr(from, comma - from));
    from = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  int kv_k = 0, kv_v = 0;
  bool ngl_given = false;
  int fit = -1;  // --fit: -1 not given
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto str = [&]() -> std::string {
      if (v == nullptr) Usage(2);
      ++i;
      return v;
    };
    auto num = [&] {
      ++i;
      return static_cast<int>(cli::NumberArg(a.c_str(), v));
    };
    if (a == "-m" || a == "--model") { o.model = str(); o.model_given = true; }
    else if (a == "--mmproj") o.mmproj = str();
    else if (a == "--allow-remote-images") o.image_fetch.enabled = true;
    else if (a == "--allowed-image-domains") {
      o.image_fetch.enabled = true;
      for (const std::string& h : SplitList(str())) o.image_fetch.allowed_hosts.push_back(CanonicalHost(h));
      if (o.image_fetch.allowed_hosts.empty()) Refuse(a, "it wants host names or addresses, comma-separated");
    }
    else if (a == "--remote-image-max-bytes") {
      const unsigned long long n = Bytes(a, v);
      ++i;
      if (n < 1 || n > llm::defaults::kMaxImageBytes) Refuse(a + " " + v, "the limit is 1 byte to 64m");
      o.image_fetch.max_bytes = static_cast<size_t>(n);
    }
    else if (a == "--remote-image-timeout") o.image_fetch.timeout_s = Real(a, v, 0.001, 600), ++i;
    else if (a == "-a" || a == "--alias") o.alias = str();
    else if (a == "--tags") o.tags = str();
    else if (a == "--host") o.host = str();
    else if (a == "--port") o.port = num();
    else if (a == "-t" || a == "--threads") o.threads = num();
    else if (a == "--max-seqs" || a == "-np" || a == "--parallel") o.max_seqs = num();
    else if (a == "-c" || a == "--ctx" || a == "--ctx-size") { o.ctx = num(); o.ctx_given = true; }
    else if (a == "--kv-blocks") o.kv_blocks = num();
    else if (a == "-ctk" || a == "--cache-type-k") { kv_k = KvType(a, v); ++i; }
    else if (a == "-ctv" || a == "--cache-type-v") { kv_v = KvType(a, v); ++i; }
    else if (a == "--max-batch-tokens" || a == "-b" || a == "--batch-size") o.max_batch_tokens = num();
    else if (a == "--kv-host-bytes") { o.kv_host_bytes = Bytes(a, v); ++i; }
    else if (a == "--kv-disk-dir") o.kv_disk_dir = str();
    else if (a == "--kv-disk-bytes") { o.kv_disk_bytes = Bytes(a, v); ++i; }
    else if (a == "--kv-role") {
      const std::string r = str();
      if (r == "prefill") o.kv_role = LLM_KV_ROLE_PRODUCER;
      else if (r == "decode") o.kv_role = LLM_KV_ROLE_CONSUMER;
      else if (r == "both") o.kv_role = LLM_KV_ROLE_BOTH;
      else {
        std::fprintf(stderr, "llm-server: --kv-role takes prefill, decode or both (got %s)\n", r.c_str());
        std::exit(2);
      }
    }
    else if (a == "--kv-listen") o.kv_listen = str();
    else if (a == "--kv-lease-ms") o.kv_lease_ms = num();
    else if (a == "-ngl" || a == "--n-gpu-layers" || a == "--gpu-layers") {
      o.n_gpu_layers = cli::GpuLayersArg(a.c_str(), v);
      ngl_given = true;
      ++i;
    }
    else if (a == "-fit" || a == "--fit") { fit = cli::FitArg(a.c_str(), v); ++i; }
    else if (a == "-ts" || a == "--tensor-split") cli::TensorSplitArg(a.c_str(), str().c_str(), o.tensor_split);
    else if (a == "-mg" || a == "--main-gpu") o.main_gpu = num();
    else if (a == "-ncmoe" || a == "--n-cpu-moe") o.n_cpu_moe = num();
    else if (a == "-cmoe" || a == "--cpu-moe") o.n_cpu_moe = -1;
    else if (a == "--moe-cache-mib") o.moe_cache_mib = num();
    else if (a == "--http-threads" || a == "--threads-http") o.http_threads = num();
    else if (a == "--chat-template") { o.chat_template = str(); o.chat_template_is_file = false; }
    else if (a == "--chat-template-file") { o.chat_template = str(); o.chat_template_is_file = true; }
    else if (a == "--api-key") o.api_keys.push_back(str());
    else if (a == "--api-key-file") o.api_key_file = str();
    else if (a == "--allowed-host") o.allowed_hosts.push_back(str());
    else if (a == "--slot-save-path") o.slot_save_path = str();
    else if (a == "--chat-template-kwargs") {
      const json kw = json::parse(str(), nullptr, false);
      if (!kw.is_object() || kw.contains("messages") || kw.contains("tools") || kw.contains("add_generation_prompt"))
        Refuse(a, "it wants a JSON object of template variables, e.g. '{\"enable_thinking\": false}'");
      o.defaults.chat_template_kwargs = kw;
    }
    else if (a == "--cors-origins") {
      for (std::string& e : SplitList(str())) o.cors_origins.push_back(std::move(e));
    }
    else if (a == "-v" || a == "--verbose") o.verbose = true;
    else if (a == "--slots") o.slots = true;
    else if (a == "--no-slots") o.slots = false;
    else if (a == "--temp") o.defaults.temperature = std::max(0.0, Real(a, v, -100, 2)), ++i;  // < 0: greedy
    else if (a == "--top-p") o.defaults.top_p = Real(a, v, 0, 1), ++i;
    else if (a == "--min-p") o.defaults.min_p = Real(a, v, 0, 1), ++i;
    else if (a == "--repeat-penalty") o.defaults.repeat_penalty = Real(a, v, 0, 10), ++i;
    else if (a == "--top-k") o.defaults.top_k = std::max(0, num());
    else if (a == "--seed" || a == "-s") {
      const int64_t s = cli::NumberArg(a.c_str(), v);
      ++i;
      if (s != -1) o.defaults.seed = static_cast<uint64_t>(s);  // -1: random, as in llama.cpp
    } else if (a == "-n" || a == "--n-predict" || a == "--predict") o.defaults.n_predict = num();
    else if (a == "--reasoning-format") {
      const std::string f = str();
      o.defaults.reasoning_format = ReasoningFormatByName(f);
      if (o.defaults.reasoning_format < 0) Refuse(a + " " + f, "the formats are none, deepseek, harmony and auto");
    }
    else if (a == "-h" || a == "--help") Usage(0);
    else if (a == "-fa" || a == "--flash-attn") {
      // llama-server takes on|off|auto after it (older versions: nothing).
      if (v != nullptr && (!std::strcmp(v, "on") || !std::strcmp(v, "off") || !std::strcmp(v, "auto"))) ++i;
      std::fprintf(stderr, "llm-server: warning: %s changes nothing here: attention is always fused\n", a.c_str());
    } else {
      bool known = false;
      for (const Ignored& g : kIgnored) {
        if (a != g.flag) continue;
        if (g.values > 0 && v == nullptr) Usage(2);
        i += g.values;
        std::fprintf(stderr, "llm-server: warning: %s changes nothing here: %s\n", a.c_str(), g.why);
        known = true;
      }
      for (const Refused& r : kRefused)
        if (a == r.flag) Refuse(a, r.why);
      if (!known) {
        std::fprintf(stderr, "llm-server: unknown option %s\n", a.c_str());
        Usage(2);
      }
    }
  }
  // -ctk sets K's type (and V's unless -ctv names another), -ctv V's
  // (llm_ctx_params.kv_type_v: 0 = as K's)
  o.kv_type = kv_k;
  o.kv_type_v = kv_v != 0 && kv_v != kv_k ? kv_v : 0;
  o.n_gpu_layers = cli::ApplyFit(o.n_gpu_layers, ngl_given, fit);
  if (o.port < 0 || o.port > 65535 || o.max_seqs < 1 || o.ctx < 1 || o.http_threads < 0) Usage(2);
  if (!o.model_given) o.model = chat::FindDefaultModel();
  return o;
}

}  // namespace server
