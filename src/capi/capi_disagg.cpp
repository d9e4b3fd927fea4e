#include "capi/capi_disagg.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "capi/capi_util.h"
#include "core/defaults.h"
#include "engine/engine.h"
#include "util/env.h"

namespace llm::capi {

namespace {

bool Produces(int32_t role) { return role == LLM_KV_ROLE_PRODUCER || role == LLM_KV_ROLE_BOTH; }
bool Consumes(int32_t role) { return role == LLM_KV_ROLE_CONSUMER || role == LLM_KV_ROLE_BOTH; }

}  // namespace

Status CheckKvRole(const llm_ctx_params& p) {
  if (p.kv_role < LLM_KV_ROLE_NONE || p.kv_role > LLM_KV_ROLE_BOTH)
    return InvalidArgument("kv_role must be one of LLM_KV_ROLE_* (0..3), got " + std::to_string(p.kv_role));
  if (p.kv_lease_ms < 0) return InvalidArgument("kv_lease_ms must be >= 0");
  if (p.kv_listen_addr != nullptr && !Produces(p.kv_role))
    return InvalidArgument("kv_listen_addr needs kv_role PRODUCER or BOTH");
  if (p.kv_role != LLM_KV_ROLE_NONE && !disagg::TransportAvailable())
    return Unsupported("kv_role: this build of llmrt has no KV transport (configure with -DLLM_UCX=ON and "
                       "libucx-dev installed)");
  return Status::Ok();
}

StatusOr<std::unique_ptr<DisaggState>> CreateDisagg(const llm_ctx_params& p, Engine& engine) {
  if (p.kv_role == LLM_KV_ROLE_NONE) return std::unique_ptr<DisaggState>();
  const kvstate::KvGeometry geometry = engine.kv_geometry();
  if (geometry.n_layer == 0)
    return Unsupported("kv_role needs a backend that reads and writes its whole KV blocks (the CPU backend, or "
                       "CUDA with every layer on the device: n_gpu_layers -1); this context's cannot");
  auto d = std::make_unique<DisaggState>();
  d->role = p.kv_role;
  d->identity = disagg::MakeIdentity(engine.model().fingerprint, geometry);
  if (Produces(p.kv_role)) {
    const int32_t ms = p.kv_lease_ms > 0 ? p.kv_lease_ms : defaults::kKvLeaseMs;
    d->leases = std::make_unique<disagg::LeaseTable>(std::chrono::milliseconds(ms));
    disagg::ServerOptions so;
    so.listen = p.kv_listen_addr != nullptr ? p.kv_listen_addr : defaults::kKvListenAddr;
    so.identity = d->identity;
    so.leases = d->leases.get();
    so.stall_ms = ReadEnv().kv_serve_stall_ms;
    LLM_ASSIGN_OR_RETURN(d->server, disagg::StartKvServer(so));
    d->host = d->server->host();
    d->port = d->server->port();
    DisaggState* state = d.get();
    engine.SetKvPublisher([state](std::vector<uint8_t> stream, int32_t n_tokens) -> StatusOr<std::string> {
      disagg::TransferDescriptor desc;
      desc.host = state->host;
      desc.port = state->port;
      desc.model_digest = state->identity.model_digest;
      desc.geometry_digest = state->identity.geometry_digest;
      desc.n_tokens = n_tokens;
      desc.bytes = stream.size();
      desc.lease = state->leases->Add(std::move(stream), n_tokens);
      return disagg::FormatDescriptor(desc);
    });
  }
  return d;
}

llm_status ApplyKvTransfer(DisaggState* d, Engine& engine, const llm_request& r, RequestSpec* spec) {
  const int32_t role = d != nullptr ? d->role : LLM_KV_ROLE_NONE;
  if (r.kv_produce != 0 && r.kv_produce != 1) return Fail(LLM_ERR_INVALID_ARGUMENT, "kv_produce must be 0 or 1");
  if (r.reserved4 != 0) return Fail(LLM_ERR_INVALID_ARGUMENT, "reserved4 must be 0");
  if (r.kv_produce == 1) {
    if (!Produces(role)) return Fail(LLM_ERR_INVALID_ARGUMENT, "kv_produce needs a context with kv_role PRODUCER or BOTH");
    if (spec->task != LLM_TASK_GENERATE) return Fail(LLM_ERR_INVALID_ARGUMENT, "kv_produce needs a GENERATE request");
    spec->kv_produce = true;
  }
  if (r.kv_transfer_desc == nullptr) return LLM_OK;
  if (!Consumes(role))
    return Fail(LLM_ERR_INVALID_ARGUMENT, "kv_transfer_desc needs a context with kv_role CONSUMER or BOTH");
  if (spec->task != LLM_TASK_GENERATE) return Fail(LLM_ERR_INVALID_ARGUMENT, "kv_transfer_desc needs a GENERATE request");
  const size_t len = strnlen(r.kv_transfer_desc, disagg::kMaxDescriptorBytes + 1);
  StatusOr<disagg::TransferDescriptor> desc = disagg::ParseDescriptor({r.kv_transfer_desc, len});
  if (!desc.ok()) return Fail(desc.status());

  const auto t0 = std::chrono::steady_clock::now();
  disagg::PullOptions po;
  po.identity = d->identity;
  po.step_timeout_ms = defaults::kKvPullStepTimeoutMs;
  po.chunk_bytes = defaults::kKvPullChunkBytes;
  StatusOr<disagg::PullResult> pulled = disagg::PullKv(*desc, po);
  Status st = pulled.status();
  int32_t imported = 0;
  uint64_t bytes = 0;
  if (pulled.ok()) {
    bytes = pulled->stream.size();
    size_t at = 0;
    const std::vector<uint8_t>& s = pulled->stream;
    auto read = [&](void* buf, size_t n) -> StatusOr<size_t> {
      const size_t k = std::min(n, s.size() - at);
      std::memcpy(buf, s.data() + at, k);
      at += k;
      return k;
    };
    kvstate::ImportResult ir = engine.ImportKv(spec->cache_salt, read);
    imported = ir.n_tokens;  // verified blocks only (each block's checksum and chained hash)
    st = ir.status;
    if (st.ok() && ir.pool_full)
      std::fprintf(stderr, "llmrt: KV consumer: the pool had room for %d of the %d transferred tokens\n", imported,
                   pulled->n_tokens);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spec->transferred_tokens = imported;
  spec->kv_transfer_status = st.code();
  std::lock_guard<std::mutex> lock(d->mu);
  d->seconds += secs;
  d->bytes += bytes;
  d->tokens += uint64_t(imported);
  if (st.ok()) {
    ++d->pulls;
  } else {
    ++d->fallbacks;
    std::fprintf(stderr, "llmrt: KV consumer: the transfer from %s:%u failed (%s): %s; %s\n", desc->host.c_str(),
                 unsigned(desc->port), llm_status_str(st.code()), st.message().c_str(),
                 imported > 0 ? "the verified blocks before the failure are kept, the rest of the prompt is computed here"
                              : "the prompt is computed here");
  }
  return LLM_OK;
}

void FillDisaggStats(DisaggState* d, llm_stats* s) {
  if (d == nullptr) return;
  s->kv_role = d->role;
  {
    std::lock_guard<std::mutex> lock(d->mu);
    s->kv_xfer_pulls = d->pulls;
    s->kv_xfer_fallbacks = d->fallbacks;
    s->kv_xfer_bytes = d->bytes;
    s->kv_xfer_tokens = d->tokens;
    s->kv_xfer_seconds = d->seconds;
  }
  if (d->leases != nullptr) {
    const disagg::LeaseCounters c = d->leases->counters();
    s->kv_xfer_served = c.served;
    s->kv_xfer_bytes_served = c.bytes_served;
    s->kv_leases_expired = c.expired;
    s->kv_lease_bytes = c.bytes_held;
    s->kv_leases_active = c.active;
  }
}

}  // namespace llm::capi
