// What a producer and a consumer compare before any KV moves: 64-bit digests
// of the model fingerprint (model/fingerprint.h) and of the KV geometry
// (kvstate/kv_format.h) but its element type, which the import converts.
// Equal digests are the handshake's test; the KV stream's own MODL and GEOM
// sections are checked again on import (CheckCompatible), so a digest
// collision still cannot put another model's KV into a context.
#pragma once

#include <cstdint>

#include "kvstate/kv_format.h"
#include "model/fingerprint.h"

namespace llm::disagg {

// The wire protocol's version (wire.h); the KV format's is kvstate::kVersion.
inline constexpr uint32_t kProtocolVersion = 1;

struct Identity {
  uint64_t model_digest = 0;
  uint64_t geometry_digest = 0;
  uint32_t format_version = kvstate::kVersion;
  uint32_t protocol_version = kProtocolVersion;
};

uint64_t ModelDigest(const ModelFingerprint& fp);
uint64_t GeometryDigest(const kvstate::KvGeometry& g);
Identity MakeIdentity(const ModelFingerprint& fp, const kvstate::KvGeometry& g);

}  // namespace llm::disagg
