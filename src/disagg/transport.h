// The KV pull transport: a server on the producer that answers the wire
// protocol (wire.h) from its LeaseTable, and the consumer's pull. Built on
// UCX (ucx_server.cpp, ucx_pull.cpp) when the build found it (LLM_UCX);
// otherwise transport_none.cpp refuses both with UNSUPPORTED.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "disagg/descriptor.h"
#include "disagg/identity.h"
#include "disagg/lease_table.h"
#include "util/status.h"

namespace llm::disagg {

// True when this build has a transport.
bool TransportAvailable();

class KvServer {
 public:
  virtual ~KvServer() = default;  // stops serving, closes every connection
  // The address consumers reach ("host:port", the port the listener took).
  virtual std::string host() const = 0;
  virtual uint16_t port() const = 0;
};

struct ServerOptions {
  std::string listen = "127.0.0.1:0";  // "host:port"
  Identity identity;
  LeaseTable* leases = nullptr;        // outlives the server
  // Test switch (LLM_KV_SERVE_STALL_MS): each PULL's second half is sent
  // this long after its first, announced on stderr (0: off).
  int64_t stall_ms = 0;
};
StatusOr<std::unique_ptr<KvServer>> StartKvServer(const ServerOptions& opt);

struct PullOptions {
  Identity identity;                   // the consumer's
  int32_t step_timeout_ms = 5000;      // each message and each run
  uint64_t chunk_bytes = uint64_t{8} << 20;
};

struct PullResult {
  std::vector<uint8_t> stream;  // the KV stream, whole
  int32_t n_tokens = 0;
  int32_t n_pulls = 0;          // PULL messages (transfers) it took
};

// Connects to the descriptor's producer, checks the identities, pulls the
// stream in runs of at most chunk_bytes (checksummed each), releases the
// lease. Fails with KV_MISMATCH (identity), KV_CORRUPT (a checksum, a short
// or malformed reply), IO (connection, timeout, the lease gone), or
// UNSUPPORTED (no transport). Never blocks past the step timeout per step.
StatusOr<PullResult> PullKv(const TransferDescriptor& d, const PullOptions& opt);

}  // namespace llm::disagg
