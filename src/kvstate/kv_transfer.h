// Export and import of prefix-cache blocks as a KV stream (kv_format.h).
// Both run where nothing else touches the pool or the backend: on the
// engine thread, or while it is paused (Engine::RunPaused), which is how
// the engine calls them.
//
// Export walks the prefix cache along `tokens` (chained hashes with the
// caller's cache salt) and writes every full block it finds, in order,
// stopping at the first one the cache lacks: only full blocks are ever
// cached, so a trailing partial block is never exported. One block's bytes
// are in memory at a time.
//
// Import checks the header against the context (CheckCompatible), then
// takes the blocks one at a time: a block the cache already holds is
// reused, any other gets a free pool block (the least recently freed:
// possibly evicting a cached block no sequence uses, never one a sequence
// holds), is converted to the pool's element type, written and registered
// under the importer's salt. Blocks are held until the end of the import so
// it never evicts its own earlier blocks, then released tail first (so the
// tail is evicted before the head, as for a finished sequence). When no
// free block is left, the import stops there: the longest prefix that fits.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "kv/block_pool.h"
#include "kvstate/kv_format.h"
#include "model/model.h"

namespace llm::kvstate {

struct KvTarget {
  BlockPool* pool = nullptr;
  Backend* backend = nullptr;
  const Model* model = nullptr;
};

// Writes the stream; returns the tokens exported (a multiple of the block
// size; 0 writes a valid stream with no block). UNSUPPORTED for a backend
// without kv_wire_layout().
StatusOr<int32_t> ExportKv(const KvTarget& t, std::span<const int32_t> tokens, uint64_t cache_salt,
                           const WriteFn& write);

struct ImportResult {
  Status status;          // OK, or why the import stopped early / was refused
  int32_t n_tokens = 0;   // tokens now reusable from the cache (also on error:
                          // the verified blocks before the failure stay)
  bool header_ok = false;      // the header was read and accepted
  int32_t n_blocks_read = 0;   // blocks taken from the stream
  bool pool_full = false;      // stopped because no free block was left
};
ImportResult ImportKv(const KvTarget& t, uint64_t cache_salt, const ReadFn& read);

}  // namespace llm::kvstate
