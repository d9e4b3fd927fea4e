#include "cli_common.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace cli {

bool Failed(llm_status s, const char* what) {
  if (s == LLM_OK) return false;
  std::fprintf(stderr, "%s: %s: %s\n", what, llm_status_str(s), llm_last_error());
  return true;
}

void JsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

double NumberArg(const char* opt, const char* value) {
  if (value == nullptr) {
    std::fprintf(stderr, "option %s needs a value\n", opt);
    std::exit(2);
  }
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(value, &end);
  if (errno != 0 || end == value || *end != '\0') {
    std::fprintf(stderr, "option %s: '%s' is not a number\n", opt, value);
    std::exit(2);
  }
  return v;
}

int32_t KvTypeArg(const char* opt, const char* value) {
  const std::string t = value == nullptr ? "" : value;
  if (t == "f16") return LLM_KV_F16;
  if (t == "f32") return LLM_KV_F32;
  if (t == "q8_0") return LLM_KV_Q8_0;
  if (t == "q4_0") return LLM_KV_Q4_0;
  if (t == "fp8_e4m3") return LLM_KV_FP8_E4M3;
  std::fprintf(stderr, "option %s: '%s' is not a KV cache type (f16, f32, q8_0, q4_0 or fp8_e4m3)\n", opt, t.c_str());
  std::exit(2);
}

void TensorSplitArg(const char* opt, const char* value, float* out) {
  const std::string t = value == nullptr ? "" : value;
  for (int i = 0; i < LLM_MAX_DEVICES; ++i) out[i] = 0.0f;
  size_t start = 0;
  for (int i = 0; start <= t.size(); ++i) {
    const size_t end = std::min(t.find_first_of(",/", start), t.size());
    const std::string item = t.substr(start, end - start);
    char* stop = nullptr;
    const double share = std::strtod(item.c_str(), &stop);
    if (i >= LLM_MAX_DEVICES || item.empty() || *stop != '\0' || !(share >= 0.0) || share > 1e30) {
      std::fprintf(stderr, "option %s: '%s' is not a list of at most %d shares >= 0 (e.g. 3,1)\n", opt, t.c_str(),
                   LLM_MAX_DEVICES);
      std::exit(2);
    }
    out[i] = static_cast<float>(share);
    start = end + 1;
  }
}

int32_t GpuLayersArg(const char* opt, const char* value) {
  if (value != nullptr && std::strcmp(value, "auto") == 0) return LLM_GPU_LAYERS_AUTO;
  if (value != nullptr && std::strcmp(value, "all") == 0) return LLM_GPU_LAYERS_ALL;
  const double v = NumberArg(opt, value);
  if (!(v >= -1.0 && v <= 1e9) || v != static_cast<double>(static_cast<int64_t>(v))) {
    std::fprintf(stderr, "option %s: '%s' is not a layer count, 'auto' or 'all'\n", opt, value);
    std::exit(2);
  }
  return static_cast<int32_t>(v);
}

int FitArg(const char* opt, const char* value) {
  const std::string v = value == nullptr ? "" : value;
  if (v == "on" || v == "1" || v == "true") return 1;
  if (v == "off" || v == "0" || v == "false") return 0;
  std::fprintf(stderr, "option %s: '%s' is not on or off\n", opt, v.c_str());
  std::exit(2);
}

int32_t ApplyFit(int32_t n_gpu_layers, bool ngl_given, int fit) {
  if (fit == 1 && !ngl_given) return LLM_GPU_LAYERS_AUTO;
  if (fit == 0 && n_gpu_layers == LLM_GPU_LAYERS_AUTO) return LLM_GPU_LAYERS_ALL;
  return n_gpu_layers;
}

void ApplyKvTypes(int32_t both, int32_t k, int32_t v, llm_ctx_params* p) {
  const int32_t kt = k != 0 ? k : both, vt = v != 0 ? v : both;
  if (kt != 0) p->kv_type = kt;
  p->kv_type_v = vt != 0 && vt != p->kv_type ? vt : LLM_KV_AUTO;
}

std::vector<llm_token> Tokenize(llm_ctx* ctx, const std::string& text, uint32_t flags) {
  int32_t n = 0;
  llm_status s = llm_tokenize(ctx, text.data(), text.size(), flags, nullptr, 0, &n);
  if (s != LLM_OK && s != LLM_ERR_BUFFER_TOO_SMALL) {
    Failed(s, "llm_tokenize");
    return {};
  }
  std::vector<llm_token> ids(static_cast<size_t>(n));
  if (Failed(llm_tokenize(ctx, text.data(), text.size(), flags, ids.data(), n, &n), "llm_tokenize")) return {};
  return ids;
}

}  // namespace cli
