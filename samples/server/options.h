// llm-server's command line: its own options, and llama.cpp's llama-server
// flags that applications pass when they start a server as a subprocess
// (`-np`, `--jinja`, `-fa`, `-ctk/-ctv`, `--alias`, ...). A llama-server
// flag that means something here is mapped onto it; one that changes
// nothing here (a performance knob of llama.cpp's, a default we always
// have) is accepted with a warning on stderr; one that would change the
// results and is not supported (`--lora`, `--mmproj`, `--embedding`, ...) is
// refused, naming it, with exit status 2.
#pragma once

#include <string>
#include <vector>

#include "image_fetch.h"
#include "request_defaults.h"

namespace server {

struct Options {
  std::string model;
  bool model_given = false;
  std::string mmproj;                // --mmproj: llm_ctx_params.mmproj_path ("" = none)
  // http(s) image URLs (image_fetch.h): --allow-remote-images,
  // --remote-image-max-bytes, --remote-image-timeout, --allowed-image-domains
  ImageFetchPolicy image_fetch = DefaultImageFetchPolicy();
  std::string alias;  // the model id served; default the file stem ("a,b": several, the first sorted is the id)
  std::string tags;   // --tags "x,y": labels /v1/models shows
  std::string host = "127.0.0.1";
  int port = 8080;
  int threads = 0;
  int max_seqs = 16;
  int ctx = 2048;
  bool ctx_given = false;
  int kv_blocks = 0;
  int kv_type = 0;        // llm_ctx_params.kv_type (LLM_KV_*); 0 = AUTO
  int kv_type_v = 0;      // llm_ctx_params.kv_type_v; 0 = as kv_type
  int n_gpu_layers = -1;  // llm_ctx_params.n_gpu_layers
  int n_cpu_moe = 0;      // llm_ctx_params.n_cpu_moe
  int moe_cache_mib = 0;  // llm_ctx_params.moe_cache_bytes in MiB
  int main_gpu = -1;      // llm_ctx_params.main_gpu
  float tensor_split[LLM_MAX_DEVICES] = {};  // llm_ctx_params.tensor_split
  int max_batch_tokens = 0;
  // KV tiers under the prefix cache (llm_ctx_params.kv_host_bytes, kv_disk_dir, kv_disk_bytes).
  unsigned long long kv_host_bytes = 0;
  std::string kv_disk_dir;
  unsigned long long kv_disk_bytes = 0;
  // Prefill/decode disaggregation (llm_ctx_params.kv_role, kv_listen_addr,
  // kv_lease_ms; docs/DISAGG.md): prefill = PRODUCER, decode = CONSUMER.
  int kv_role = 0;
  std::string kv_listen;  // "" = 127.0.0.1:0
  int kv_lease_ms = 0;
  int http_threads = 0;  // 0: 4 per sequence slot, at least 8
  std::string chat_template;       // a name, Jinja text or a file (template_choice.h)
  bool chat_template_is_file = false;  // given as --chat-template-file
  std::vector<std::string> api_keys;
  std::string api_key_file;
  std::vector<std::string> allowed_hosts;
  std::vector<std::string> cors_origins;  // --cors-origins, comma-separated
  std::string slot_save_path;             // --slot-save-path: slot files (slot_store.h)
  bool verbose = false;
  bool slots = true;  // GET /slots answers (--no-slots: 501, as llama-server)
  RequestDefaults defaults;  // --temp, --top-k, --top-p, --min-p, --repeat-penalty, --seed, -n
};

// "b,a,,b" -> {"a", "b"}: sorted, unique, no empty items.
std::vector<std::string> SplitList(const std::string& list);

// Parses argv; prints usage and exits on -h (0) or a bad or refused
// argument (2). Warnings for accepted-but-meaningless flags go to stderr.
Options ParseArgs(int argc, char** argv);

}  // namespace server
