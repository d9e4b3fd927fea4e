// The C API's side of prefill/decode disaggregation (llm_ctx_params.kv_role,
// llm_request.kv_produce / kv_transfer_desc; docs/DISAGG.md): a producer
// context's lease table and UCX server, a consumer's pull-then-import at
// llm_submit, and their counters for llm_get_stats. The transport and the
// protocol are src/disagg/.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "disagg/identity.h"
#include "disagg/lease_table.h"
#include "disagg/transport.h"
#include "engine/request_state.h"
#include "llm.h"
#include "util/status.h"

namespace llm {
class Engine;
}

namespace llm::capi {

struct DisaggState {
  int32_t role = LLM_KV_ROLE_NONE;
  disagg::Identity identity;
  std::unique_ptr<disagg::LeaseTable> leases;  // producer
  std::unique_ptr<disagg::KvServer> server;    // producer; goes before the leases
  std::string host;                            // producer: the address descriptors name
  uint16_t port = 0;
  // consumer counters
  std::mutex mu;
  uint64_t pulls = 0, fallbacks = 0, bytes = 0, tokens = 0;
  double seconds = 0.0;
};

// kv_role, kv_lease_ms and kv_listen_addr in range (before the model loads).
Status CheckKvRole(const llm_ctx_params& p);
// The context's disaggregation state: null without a role; UNSUPPORTED when
// this build has no transport or the backend cannot read its KV blocks.
StatusOr<std::unique_ptr<DisaggState>> CreateDisagg(const llm_ctx_params& p, Engine& engine);
// A request's kv_produce / kv_transfer_desc: checked, then (consumer) the
// pull and the import, whose outcome goes into *spec. Only argument errors
// fail the submit; a failed transfer is logged and the prompt computed.
llm_status ApplyKvTransfer(DisaggState* d, Engine& engine, const llm_request& r, RequestSpec* spec);
void FillDisaggStats(DisaggState* d, llm_stats* s);

}  // namespace llm::capi
