// The KV stream format, version 1: how a context's KV blocks leave it and
// come back (saved conversations today; the host/disk tiers and the
// prefill/decode transfer next). docs/KV_FORMAT.md is the specification;
// this file writes and reads it, and checks a stream before anything trusts
// it.
//
//   stream  = header section* END
//   header  = magic "LLMKV\r\n\x1a" (8) | u32 version | u32 flags (0)
//   section = u32 tag | u32 flags (bit 0: required) | u64 length | payload (length)
//
//   version 1 writes:  MODL (required)  model fingerprint
//                      VELM (required)  i32 V's element type, only when it
//                                       differs from GEOM's elem (K's)
//                      GEOM (required)  KV geometry
//                      BLCK * n         one KV block each, in prefix order
//                      END  (required)  u64 n (the block count)
//
// A reader skips a section whose tag it does not know unless it is marked
// required (then the stream needs a newer reader: KV_MISMATCH). Every
// integer is little-endian. A BLCK payload:
//
//   u32 index | u32 0 | u64 parent hash | u64 hash | i32 tokens (block_size)
//   | K/V in the wire layout (backend/kv_wire.h) | u64 checksum of all before
//
// hash = BlockPool::HashBlock(parent, 0, tokens): the unsalted chained
// prefix hash, the block's identity wherever it lives (an importer
// re-hashes with its own cache salt).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "backend/kv_wire.h"
#include "kv/block_pool.h"
#include "model/config.h"
#include "model/fingerprint.h"
#include "util/status.h"

namespace llm::kvstate {

inline constexpr char kMagic[8] = {'L', 'L', 'M', 'K', 'V', '\r', '\n', '\x1a'};
inline constexpr uint32_t kVersion = 1;
// Section tags: four ASCII bytes, read as a little-endian u32.
inline constexpr uint32_t Tag(const char (&s)[5]) {
  return uint32_t(uint8_t(s[0])) | uint32_t(uint8_t(s[1])) << 8 | uint32_t(uint8_t(s[2])) << 16 |
         uint32_t(uint8_t(s[3])) << 24;
}
inline constexpr uint32_t kTagModel = Tag("MODL");
inline constexpr uint32_t kTagGeometry = Tag("GEOM");
inline constexpr uint32_t kTagBlock = Tag("BLCK");
inline constexpr uint32_t kTagEnd = Tag("END ");
// Tier files (kvstate/tier_file.h): the blocks continue a chain that starts
// elsewhere, under a cache salt: u64 salt | u64 parent hash of block 0.
inline constexpr uint32_t kTagTier = Tag("TIER");
// V's element type when it is not K's (GEOM's elem): i32, a wire type.
// Written before GEOM, and only then, so a single-type stream is what it
// was; marked required, so a reader that does not know it refuses the
// stream (KV_MISMATCH) instead of reading V in K's type.
inline constexpr uint32_t kTagVElem = Tag("VELM");
inline constexpr uint32_t kSectionRequired = 1;
// The chained block hash function (BlockPool::HashBlock); another one would
// be another id, and a reader refuses ids it does not know.
inline constexpr uint32_t kHashChainV1 = 1;

// What a reader accepts before allocating anything for a stream.
inline constexpr int64_t kMaxBlockBytes = int64_t{1} << 30;
inline constexpr uint64_t kMaxMetaSection = uint64_t{64} << 20;  // MODL, GEOM

// The shape of the KV a stream carries: everything that must be equal for a
// block to mean the same thing in another context (but the element type,
// which converts).
struct KvGeometry {
  int32_t n_layer = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t block_size = 0;
  int32_t elem = LLM_KV_F32;      // K's (and V's) wire element type (backend/kv_wire.h)
  int32_t elem_v = 0;             // V's when it differs (the VELM section); 0: as elem
  uint32_t hash_fn = kHashChainV1;
  std::vector<int32_t> window;    // (n_layer) each layer's sliding window; 0 = global

  KvWireLayout wire() const { return {n_layer, n_head_kv, head_dim, block_size, elem, elem_v}; }
};

// The geometry of a context running `config` with a pool of `wire` layout.
KvGeometry ContextGeometry(const ModelConfig& config, const KvWireLayout& wire);

struct StreamHeader {
  uint32_t version = 0;
  ModelFingerprint model;
  KvGeometry geometry;
  // A TIER section (written before MODL): the blocks' hashes are salted
  // with `salt` and block 0's parent is `first_parent` (a tier file holds
  // one block from the middle of a prefix). Without it: salt 0, parent 0.
  bool tier = false;
  uint64_t salt = 0;
  BlockHash first_parent = 0;
};

struct BlockRecord {
  uint32_t index = 0;
  BlockHash parent = 0, hash = 0;
  std::vector<int32_t> tokens;  // (block_size)
  std::vector<uint8_t> kv;      // (geometry.wire().block_bytes())
};

// Writes `n` bytes or fails (the caller's callback said no).
using WriteFn = std::function<Status(const void* data, size_t n)>;
// Reads up to `n` bytes into `buf`; fewer only at the end of the stream.
using ReadFn = std::function<StatusOr<size_t>(void* buf, size_t n)>;

class StreamWriter {
 public:
  explicit StreamWriter(WriteFn write) : write_(std::move(write)) {}
  Status WriteHeader(const ModelFingerprint& model, const KvGeometry& geometry);
  // A tier file's header: TIER (salt, parent of block 0), then as above.
  Status WriteTierHeader(const ModelFingerprint& model, const KvGeometry& geometry, uint64_t salt,
                         BlockHash first_parent);
  // The block after the last one written (index = blocks written so far).
  Status WriteBlock(BlockHash parent, BlockHash hash, std::span<const int32_t> tokens, std::span<const uint8_t> kv);
  Status Finish();  // the END section
  uint64_t bytes() const { return bytes_; }

 private:
  Status Section(uint32_t tag, uint32_t flags, std::span<const uint8_t> payload);
  WriteFn write_;
  uint64_t bytes_ = 0;
  uint32_t n_blocks_ = 0;
  bool tier_ = false;
  std::vector<uint8_t> tier_payload_;
};

// Reads a stream and checks everything a stream can check by itself: magic,
// version, section framing, lengths, bounds, the END count, every block's
// checksum, index and hash chain (from the TIER section's parent and salt
// when there is one). Whether it fits a context is
// CheckCompatible's question. Errors: KV_CORRUPT (malformed, truncated,
// checksum), KV_MISMATCH (a newer version or required section), or the
// read callback's status; each message names the byte offset.
class StreamReader {
 public:
  explicit StreamReader(ReadFn read) : read_(std::move(read)) {}
  Status ReadHeader(StreamHeader* out);
  // The next block into *out (its vectors reused): true; false after END.
  // Needs ReadHeader first.
  StatusOr<bool> NextBlock(BlockRecord* out);
  uint64_t offset() const { return offset_; }

 private:
  Status ReadExact(void* buf, size_t n, const char* what);
  Status ReadSectionHead(uint32_t* tag, uint32_t* flags, uint64_t* length);
  Status ReadPayload(uint64_t length, std::vector<uint8_t>* out, const char* what);
  Status Skip(uint64_t length);
  Status ParseModel(const std::vector<uint8_t>& p, ModelFingerprint* out);
  Status ParseVElem(const std::vector<uint8_t>& p, int32_t* elem_v);
  Status ParseGeometry(const std::vector<uint8_t>& p, KvGeometry* out, int32_t elem_v);

  ReadFn read_;
  uint64_t offset_ = 0;
  KvGeometry geometry_;
  bool have_header_ = false, done_ = false;
  uint32_t n_blocks_ = 0;
  uint64_t salt_ = 0;       // the TIER section's, else 0
  BlockHash last_hash_ = 0;
  std::vector<uint8_t> scratch_;
};

// OK when a stream's blocks mean the same in a context running `model` with
// geometry `context` (the element type may differ: it converts); else
// KV_MISMATCH naming the first difference (architecture, a tensor, the
// weights, a geometry field).
Status CheckCompatible(const StreamHeader& stream, const ModelFingerprint& model, const KvGeometry& context);

}  // namespace llm::kvstate
