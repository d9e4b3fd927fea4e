#include "kvstate/tier_file.h"

#include "kvstate/kv_convert.h"

namespace llm::kvstate {

Status WriteTierFile(const WriteFn& write, const ModelFingerprint& model, const KvGeometry& geometry,
                     const TierBlock& b) {
  StreamWriter w(write);
  LLM_RETURN_IF_ERROR(w.WriteTierHeader(model, geometry, b.salt, b.parent));
  LLM_RETURN_IF_ERROR(w.WriteBlock(b.parent, b.hash, b.tokens, b.kv));
  return w.Finish();
}

namespace {

Status ReadCheckedHeader(StreamReader* reader, const ModelFingerprint& model, const KvGeometry& geometry,
                         StreamHeader* h) {
  LLM_RETURN_IF_ERROR(reader->ReadHeader(h));
  if (!h->tier) return KvMismatch("not a KV tier file (no TIER section): an exported conversation?");
  return CheckCompatible(*h, model, geometry);
}

}  // namespace

Status CheckTierFileHeader(const ReadFn& read, const ModelFingerprint& model, const KvGeometry& geometry) {
  StreamReader reader(read);
  StreamHeader h;
  return ReadCheckedHeader(&reader, model, geometry, &h);
}

Status ReadTierFile(const ReadFn& read, const ModelFingerprint& model, const KvGeometry& geometry, TierBlock* out) {
  StreamReader reader(read);
  StreamHeader h;
  LLM_RETURN_IF_ERROR(ReadCheckedHeader(&reader, model, geometry, &h));
  BlockRecord rec;
  LLM_ASSIGN_OR_RETURN(bool got, reader.NextBlock(&rec));
  if (!got) return KvCorrupt("KV tier file holds no block");
  BlockRecord extra;
  LLM_ASSIGN_OR_RETURN(bool more, reader.NextBlock(&extra));
  if (more) return KvCorrupt("KV tier file holds more than one block");
  // The reader checked hash == HashBlock(parent, salt, tokens) and the
  // parent against the TIER section.
  out->hash = rec.hash;
  out->parent = rec.parent;
  out->salt = h.salt;
  out->tokens = std::move(rec.tokens);
  const KvWireLayout from = h.geometry.wire();
  const KvWireLayout to = geometry.wire();
  if (from.SameElems(to)) {
    out->kv = std::move(rec.kv);
  } else {
    out->kv.resize(static_cast<size_t>(to.block_bytes()));
    ConvertKvBlock(from, rec.kv, to, out->kv);
  }
  return Status::Ok();
}

}  // namespace llm::kvstate
