// kv_transfer_params, vLLM's OpenAI-server convention for prefill/decode
// disaggregation (docs/DISAGG.md), on llm-server:
//
//   request  {"do_remote_decode": true, ...}   prefill server (--kv-role prefill|both): run the
//                                              prompt, hold its KV, answer with the params below
//   response {"do_remote_decode": false, "do_remote_prefill": true,
//             "remote_engine_id": "<model digest>", "remote_host": ..., "remote_port": ...,
//             "remote_block_ids": null, "llmrt_descriptor": "llmkv1 ..."}
//   request  {"do_remote_prefill": true, "llmrt_descriptor": "llmkv1 ...", ...}
//                                              decode server (--kv-role decode|both): pull that
//                                              KV first (or compute the prompt if the pull fails)
//
// Other keys (vLLM's remote_* nulls, a proxy's own) are ignored; null or
// absent params mean an ordinary request.
#pragma once

#include <string>

#include "openai_request.h"

namespace server {

// Reads body["kv_transfer_params"] into g->kv_produce / g->kv_transfer_desc.
// False with *err (400, param kv_transfer_params) when it is malformed, or
// asks for a transfer of more than one prompt or sequence.
bool ParseKvTransferParams(const json& body, Generation* g, ApiError* err);

// The response's kv_transfer_params for a producer's descriptor.
json KvTransferParamsJson(const std::string& descriptor);

}  // namespace server
