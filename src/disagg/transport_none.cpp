// The transport of a build without UCX: none (transport.h).
#include "disagg/transport.h"

namespace llm::disagg {

namespace {
Status NoUcx() {
  return Unsupported("this build of llmrt has no KV transport: configure with -DLLM_UCX=ON and libucx-dev installed");
}
}  // namespace

bool TransportAvailable() { return false; }
StatusOr<std::unique_ptr<KvServer>> StartKvServer(const ServerOptions&) { return NoUcx(); }
StatusOr<PullResult> PullKv(const TransferDescriptor&, const PullOptions&) { return NoUcx(); }

}  // namespace llm::disagg
