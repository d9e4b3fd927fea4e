#include "kvstate/kv_transfer.h"

#include <vector>

#include "kvstate/kv_convert.h"

namespace llm::kvstate {

StatusOr<int32_t> ExportKv(const KvTarget& t, std::span<const int32_t> tokens, uint64_t salt, const WriteFn& write) {
  const KvWireLayout wire = t.backend->kv_wire_layout();
  if (wire.n_layer == 0)
    return Unsupported("this backend cannot export its KV cache (a model split between CPU and CUDA cannot; each backend alone can)");
  BlockPool& pool = *t.pool;
  const size_t bs = static_cast<size_t>(pool.block_size());
  // The cached chain along `tokens`: pool blocks, and the unsalted hashes
  // the stream names them by.
  std::vector<int32_t> blocks;
  BlockHash parent = 0;
  for (size_t i = 0; (i + 1) * bs <= tokens.size(); ++i) {
    auto toks = tokens.subspan(i * bs, bs);
    const BlockHash h = BlockPool::HashBlock(parent, salt, toks);
    auto b = pool.Lookup(h, parent, toks);
    if (!b) break;
    blocks.push_back(*b);
    parent = h;
  }
  StreamWriter w(write);
  LLM_RETURN_IF_ERROR(w.WriteHeader(t.model->fingerprint, ContextGeometry(t.model->config, wire)));
  std::vector<uint8_t> buf(static_cast<size_t>(wire.block_bytes()));
  BlockHash id_parent = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    auto toks = tokens.subspan(i * bs, bs);
    const BlockHash id = BlockPool::HashBlock(id_parent, 0, toks);
    LLM_RETURN_IF_ERROR(t.backend->ReadKvBlock(blocks[i], buf));
    LLM_RETURN_IF_ERROR(w.WriteBlock(id_parent, id, toks, buf));
    id_parent = id;
  }
  LLM_RETURN_IF_ERROR(w.Finish());
  return static_cast<int32_t>(blocks.size() * bs);
}

ImportResult ImportKv(const KvTarget& t, uint64_t salt, const ReadFn& read) {
  ImportResult r;
  const KvWireLayout wire = t.backend->kv_wire_layout();
  if (wire.n_layer == 0) {
    r.status = Unsupported("this backend cannot import a KV cache (a model split between CPU and CUDA cannot; each backend alone can)");
    return r;
  }
  StreamReader reader(read);
  StreamHeader header;
  r.status = reader.ReadHeader(&header);
  if (r.status.ok())
    r.status = CheckCompatible(header, t.model->fingerprint, ContextGeometry(t.model->config, wire));
  if (r.status.ok() && header.tier)  // one block from the middle of a prefix, not a conversation
    r.status = KvMismatch("KV stream is a tier file (one block of a longer prefix), not an exported conversation");
  if (!r.status.ok()) return r;
  r.header_ok = true;

  BlockPool& pool = *t.pool;
  const KvWireLayout from = header.geometry.wire();
  const bool convert = !from.SameElems(wire);  // K's type, V's, or both
  std::vector<uint8_t> converted(convert ? static_cast<size_t>(wire.block_bytes()) : 0);
  const int32_t n_vocab = t.model->config.n_vocab;
  std::vector<int32_t> held;  // blocks of the imported prefix, one reference each
  BlockRecord rec;
  BlockHash parent = 0;
  while (true) {
    StatusOr<bool> more = reader.NextBlock(&rec);
    if (!more.ok()) {
      r.status = more.status();
      break;
    }
    if (!*more) break;
    ++r.n_blocks_read;
    bool tokens_ok = true;
    for (int32_t tok : rec.tokens) tokens_ok &= tok >= 0 && tok < n_vocab;
    if (!tokens_ok) {
      r.status = KvMismatch("KV stream: block " + std::to_string(rec.index) + " holds a token id outside this "
                            "model's vocabulary of " + std::to_string(n_vocab));
      break;
    }
    const BlockHash h = BlockPool::HashBlock(parent, salt, rec.tokens);
    if (auto b = pool.Lookup(h, parent, rec.tokens)) {  // already cached: reuse it
      pool.Touch(*b);
      held.push_back(*b);
      parent = h;
      continue;
    }
    if (pool.n_free() == 0) {
      r.pool_full = true;
      break;
    }
    const int32_t b = *pool.Allocate();
    if (convert) ConvertKvBlock(from, rec.kv, wire, converted);
    Status st = t.backend->WriteKvBlock(b, convert ? std::span<const uint8_t>(converted) : rec.kv);
    if (st.ok()) pool.Register(b, h, parent, salt, rec.tokens);
    if (!st.ok() || !pool.is_cached(b)) {  // a backend failure; or a hash another block holds (a collision)
      pool.Release(b);
      r.status = st.ok() ? Status::Ok() : st;
      break;
    }
    held.push_back(b);
    parent = h;
  }
  r.n_tokens = static_cast<int32_t>(held.size()) * pool.block_size();
  pool.ReleaseAll(&held);
  return r;
}

}  // namespace llm::kvstate
