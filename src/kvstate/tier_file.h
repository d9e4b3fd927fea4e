// One KV block as a file of the disk tier: a KV stream (kv_format.h) that
// starts with a TIER section (the block's cache salt and the hash of the
// block before it), then MODL, GEOM, one BLCK and END. So a tier file is
// checked like any stream — magic, version, model fingerprint, geometry,
// the block's checksum — and its hash is checked against its salt, parent
// and tokens. docs/KV_FORMAT.md, "Tier files".
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_pool.h"
#include "kvstate/kv_format.h"

namespace llm::kvstate {

// One block below the pool: the pool's key for it and its K/V in the wire
// layout of the context's element type.
struct TierBlock {
  BlockHash hash = 0, parent = 0;  // salted, as the pool keys them
  uint64_t salt = 0;
  std::vector<int32_t> tokens;     // (block_size)
  std::vector<uint8_t> kv;         // (wire.block_bytes())
  uint64_t bytes() const { return kv.size() + tokens.size() * sizeof(int32_t) + 64; }
};

Status WriteTierFile(const WriteFn& write, const ModelFingerprint& model, const KvGeometry& geometry,
                     const TierBlock& block);

// Reads a tier file for a context of `model` and `geometry` into *out (K
// and V each converted to geometry's type for that side if the file's
// differs). KV_MISMATCH: another
// model or geometry, or not a tier file; KV_CORRUPT: malformed, truncated,
// a bad checksum or hash, more or fewer than one block.
Status ReadTierFile(const ReadFn& read, const ModelFingerprint& model, const KvGeometry& geometry, TierBlock* out);

// Only the header (for a directory scan): KV_MISMATCH when the file is of
// another model or geometry, KV_CORRUPT when it is malformed.
Status CheckTierFileHeader(const ReadFn& read, const ModelFingerprint& model, const KvGeometry& geometry);

}  // namespace llm::kvstate
