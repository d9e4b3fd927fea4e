#include "kv_transfer_params.h"

#include <cstdlib>

namespace server {

namespace {

constexpr size_t kMaxDescriptor = 512;  // llm.h's descriptors are shorter

// "llmkv1 addr=HOST:PORT lease=... model=HEX ..." -> the named field's text.
std::string DescriptorField(const std::string& d, const std::string& key) {
  const size_t at = d.find(" " + key + "=");
  if (at == std::string::npos) return "";
  const size_t from = at + key.size() + 2;
  return d.substr(from, d.find(' ', from) - from);
}

// An optional boolean member of the params (null = false).
bool Flag(const json& p, const char* name, bool* out, ApiError* err) {
  const json* f = Field(p, name);
  if (f == nullptr || f->is_null()) return true;
  if (!f->is_boolean()) return Bad(err, "kv_transfer_params", std::string("kv_transfer_params.") + name + " must be a boolean");
  *out = f->get<bool>();
  return true;
}

}  // namespace

bool ParseKvTransferParams(const json& body, Generation* g, ApiError* err) {
  const json* p = Field(body, "kv_transfer_params");
  if (p == nullptr || p->is_null()) return true;
  if (!p->is_object()) return Bad(err, "kv_transfer_params", "kv_transfer_params must be an object");
  bool remote_decode = false, remote_prefill = false;
  if (!Flag(*p, "do_remote_decode", &remote_decode, err) || !Flag(*p, "do_remote_prefill", &remote_prefill, err))
    return false;
  if (remote_decode && remote_prefill)
    return Bad(err, "kv_transfer_params", "kv_transfer_params: do_remote_decode and do_remote_prefill exclude each other");
  if (!remote_decode && !remote_prefill) return true;
  if (g->prompts.size() > 1 || g->n > 1)
    return Bad(err, "kv_transfer_params", "kv_transfer_params: a transfer carries one prompt's KV (one prompt, n = 1)");
  if (remote_decode) {
    g->kv_produce = true;
    return true;
  }
  const json* d = Field(*p, "llmrt_descriptor");
  if (d == nullptr || !d->is_string() || d->get_ref<const std::string&>().empty() ||
      d->get_ref<const std::string&>().size() > kMaxDescriptor)
    return Bad(err, "kv_transfer_params",
               "kv_transfer_params.do_remote_prefill needs llmrt_descriptor: the string a prefill server's "
               "response carried");
  g->kv_transfer_desc = d->get<std::string>();
  return true;
}

json KvTransferParamsJson(const std::string& descriptor) {
  const std::string addr = DescriptorField(descriptor, "addr");
  const size_t colon = addr.rfind(':');
  json port = nullptr;
  if (colon != std::string::npos) port = std::atoi(addr.c_str() + colon + 1);
  return json{{"do_remote_decode", false},
              {"do_remote_prefill", true},
              {"remote_engine_id", DescriptorField(descriptor, "model")},
              {"remote_block_ids", nullptr},
              {"remote_host", colon != std::string::npos ? json(addr.substr(0, colon)) : json(nullptr)},
              {"remote_port", port},
              {"llmrt_descriptor", descriptor}};
}

}  // namespace server
