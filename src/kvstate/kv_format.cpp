#include "kvstate/kv_format.h"

#include "kvstate/kv_convert.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace llm::kvstate {

static_assert(std::endian::native == std::endian::little, "the KV stream is little-endian; add byte swaps here");

namespace {

// ---- payload encoding: little-endian integers appended to / read from bytes

struct Out {
  std::vector<uint8_t> b;
  template <typename T>
  void Put(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof v);
    std::memcpy(b.data() + at, &v, sizeof v);
  }
  void PutString(const std::string& s) {
    Put(static_cast<uint32_t>(s.size()));
    b.insert(b.end(), s.begin(), s.end());
  }
};

// A bounds-checked cursor over one section's payload; the first failure
// sticks, so a parse reads on and checks once.
struct In {
  const std::vector<uint8_t>& b;
  size_t at = 0;
  bool bad = false;
  template <typename T>
  T Get() {
    T v{};
    if (bad || b.size() - at < sizeof v) {
      bad = true;
      return v;
    }
    std::memcpy(&v, b.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string GetString(uint32_t max_len) {
    const uint32_t n = Get<uint32_t>();
    if (bad || n > max_len || b.size() - at < n) {
      bad = true;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(b.data() + at), n);
    at += n;
    return s;
  }
  bool done() const { return !bad && at == b.size(); }
};

std::string TagName(uint32_t tag) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    const char c = static_cast<char>(tag >> (8 * i));
    s += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  return "'" + s + "'";
}

// The fixed part of a BLCK payload before the tokens.
constexpr size_t kBlockPrefix = 4 + 4 + 8 + 8;

uint64_t BlockChecksum(const uint8_t* prefix, std::span<const int32_t> tokens, std::span<const uint8_t> kv) {
  uint64_t h = Hash64(prefix, kBlockPrefix);
  h = Hash64(tokens.data(), tokens.size_bytes(), h);
  return Hash64(kv.data(), kv.size(), h);
}

// One side's element type from GEOM or VELM: a wire type the library reads
// (5, the unrotated Q4_0 of an earlier build, is refused by name).
Status CheckElem(int32_t elem, int32_t head_dim, const char* side) {
  if (elem == kKvWireQ4_0Unrotated)
    return KvMismatch(std::string("KV stream: ") + side + " element type 5 is the unrotated Q4_0 KV of an earlier "
                      "llmrt build; this one's Q4_0 (6) holds Hadamard-rotated rows: export the prefix again");
  if (elem != LLM_KV_F32 && elem != LLM_KV_F16 && elem != LLM_KV_Q8_0 && elem != kKvWireBf16 && elem != kKvWireQ4_0 &&
      elem != kKvWireFp8)
    return KvCorrupt(std::string("KV stream: unknown ") + side + " element type " + std::to_string(elem));
  if ((elem == kKvWireQ4_0 || elem == kKvWireFp8) && head_dim % kQ4Block != 0)
    return KvCorrupt(std::string("KV stream: ") + (elem == kKvWireFp8 ? "FP8 E4M3 " : "Q4_0 ") + side +
                     " with head_dim " + std::to_string(head_dim) + ", not a multiple of 32");
  return Status::Ok();
}

std::string Dims(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

}  // namespace

KvGeometry ContextGeometry(const ModelConfig& config, const KvWireLayout& wire) {
  KvGeometry g;
  g.n_layer = static_cast<int32_t>(wire.n_layer);
  g.n_head_kv = static_cast<int32_t>(wire.n_head_kv);
  g.head_dim = static_cast<int32_t>(wire.head_dim);
  g.block_size = static_cast<int32_t>(wire.block_size);
  g.elem = wire.Elem(0);
  g.elem_v = wire.Elem(1) != g.elem ? wire.Elem(1) : 0;
  for (int32_t l = 0; l < g.n_layer; ++l) g.window.push_back(config.IsLocalLayer(l) ? config.sliding_window : 0);
  return g;
}

// ---------------------------------------------------------------- writing

Status StreamWriter::Section(uint32_t tag, uint32_t flags, std::span<const uint8_t> payload) {
  Out h;
  h.Put(tag);
  h.Put(flags);
  h.Put(static_cast<uint64_t>(payload.size()));
  LLM_RETURN_IF_ERROR(write_(h.b.data(), h.b.size()));
  if (!payload.empty()) LLM_RETURN_IF_ERROR(write_(payload.data(), payload.size()));
  bytes_ += h.b.size() + payload.size();
  return Status::Ok();
}

Status StreamWriter::WriteTierHeader(const ModelFingerprint& model, const KvGeometry& g, uint64_t salt,
                                     BlockHash first_parent) {
  tier_ = true;
  Out t;
  t.Put(salt);
  t.Put(first_parent);
  tier_payload_ = std::move(t.b);
  return WriteHeader(model, g);
}

Status StreamWriter::WriteHeader(const ModelFingerprint& model, const KvGeometry& g) {
  Out h;
  for (char c : kMagic) h.Put(static_cast<uint8_t>(c));
  h.Put(kVersion);
  h.Put(uint32_t{0});
  LLM_RETURN_IF_ERROR(write_(h.b.data(), h.b.size()));
  bytes_ += h.b.size();
  if (tier_) LLM_RETURN_IF_ERROR(Section(kTagTier, kSectionRequired, tier_payload_));

  Out m;
  m.PutString(model.arch);
  m.Put(model.weights_hash);
  m.Put(static_cast<uint32_t>(model.tensors.size()));
  for (const FingerprintTensor& t : model.tensors) {
    m.PutString(t.name);
    m.Put(t.type);
    m.Put(static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) m.Put(d);
  }
  LLM_RETURN_IF_ERROR(Section(kTagModel, kSectionRequired, m.b));

  if (g.elem_v != 0 && g.elem_v != g.elem) {
    Out v;
    v.Put(g.elem_v);
    LLM_RETURN_IF_ERROR(Section(kTagVElem, kSectionRequired, v.b));
  }

  Out geo;
  geo.Put(g.n_layer);
  geo.Put(g.n_head_kv);
  geo.Put(g.head_dim);
  geo.Put(g.block_size);
  geo.Put(g.elem);
  geo.Put(g.hash_fn);
  for (int32_t w : g.window) geo.Put(w);
  return Section(kTagGeometry, kSectionRequired, geo.b);
}

Status StreamWriter::WriteBlock(BlockHash parent, BlockHash hash, std::span<const int32_t> tokens,
                                std::span<const uint8_t> kv) {
  Out p;
  p.Put(n_blocks_);
  p.Put(uint32_t{0});
  p.Put(parent);
  p.Put(hash);
  const uint64_t sum = BlockChecksum(p.b.data(), tokens, kv);
  Out h;
  h.Put(kTagBlock);
  h.Put(uint32_t{0});
  h.Put(static_cast<uint64_t>(kBlockPrefix + tokens.size_bytes() + kv.size() + 8));
  LLM_RETURN_IF_ERROR(write_(h.b.data(), h.b.size()));
  LLM_RETURN_IF_ERROR(write_(p.b.data(), p.b.size()));
  LLM_RETURN_IF_ERROR(write_(tokens.data(), tokens.size_bytes()));
  LLM_RETURN_IF_ERROR(write_(kv.data(), kv.size()));
  LLM_RETURN_IF_ERROR(write_(&sum, sizeof sum));
  bytes_ += h.b.size() + kBlockPrefix + tokens.size_bytes() + kv.size() + 8;
  ++n_blocks_;
  return Status::Ok();
}

Status StreamWriter::Finish() {
  Out e;
  e.Put(static_cast<uint64_t>(n_blocks_));
  return Section(kTagEnd, kSectionRequired, e.b);
}

// ---------------------------------------------------------------- reading

Status StreamReader::ReadExact(void* buf, size_t n, const char* what) {
  size_t got = 0;
  while (got < n) {
    StatusOr<size_t> r = read_(static_cast<uint8_t*>(buf) + got, n - got);
    if (!r.ok()) return r.status();
    if (*r == 0 || *r > n - got) {
      if (*r > n - got) return InvalidArgument("the read callback reported more bytes than asked for");
      return KvCorrupt("KV stream truncated at byte " + std::to_string(offset_ + got) + " (inside " + what + ")");
    }
    got += *r;
  }
  offset_ += n;
  return Status::Ok();
}

Status StreamReader::ReadSectionHead(uint32_t* tag, uint32_t* flags, uint64_t* length) {
  uint8_t h[16];
  LLM_RETURN_IF_ERROR(ReadExact(h, sizeof h, "a section header"));
  std::memcpy(tag, h, 4);
  std::memcpy(flags, h + 4, 4);
  std::memcpy(length, h + 8, 8);
  // A known section with a flag this reader does not know (a later version
  // marking, say, a compressed block) must not be read as if it had none.
  const bool known = *tag == kTagModel || *tag == kTagGeometry || *tag == kTagBlock || *tag == kTagEnd ||
                     *tag == kTagTier || *tag == kTagVElem;
  if (known && (*flags & ~kSectionRequired) != 0)
    return KvMismatch("KV stream: section " + TagName(*tag) + " at byte " + std::to_string(offset_ - 16) +
                      " has flags " + std::to_string(*flags) + " unknown to this library (a newer writer)");
  return Status::Ok();
}

// Reads a bounded section into memory in steps, so a length that lies costs
// no more memory than the bytes really there.
Status StreamReader::ReadPayload(uint64_t length, std::vector<uint8_t>* out, const char* what) {
  if (length > kMaxMetaSection)
    return KvCorrupt(std::string("KV stream: the ") + what + " section at byte " + std::to_string(offset_) +
                     " claims " + std::to_string(length) + " bytes (at most " + std::to_string(kMaxMetaSection) + ")");
  out->clear();
  while (out->size() < length) {
    const size_t at = out->size();
    const size_t step = static_cast<size_t>(std::min<uint64_t>(length - at, 1 << 16));
    out->resize(at + step);
    LLM_RETURN_IF_ERROR(ReadExact(out->data() + at, step, what));
  }
  return Status::Ok();
}

Status StreamReader::Skip(uint64_t length) {
  uint8_t buf[4096];
  while (length > 0) {
    const size_t step = static_cast<size_t>(std::min<uint64_t>(length, sizeof buf));
    LLM_RETURN_IF_ERROR(ReadExact(buf, step, "a skipped section"));
    length -= step;
  }
  return Status::Ok();
}

Status StreamReader::ParseModel(const std::vector<uint8_t>& p, ModelFingerprint* out) {
  In in{p};
  out->arch = in.GetString(256);
  out->weights_hash = in.Get<uint64_t>();
  const uint32_t n = in.Get<uint32_t>();
  if (!in.bad && n > p.size() / 12) in.bad = true;  // each tensor takes at least 12 bytes
  out->tensors.clear();
  for (uint32_t i = 0; i < n && !in.bad; ++i) {
    FingerprintTensor t;
    t.name = in.GetString(4096);
    t.type = in.Get<int32_t>();
    const uint32_t nd = in.Get<uint32_t>();
    if (nd > 8) in.bad = true;
    for (uint32_t d = 0; d < nd && !in.bad; ++d) t.dims.push_back(in.Get<int64_t>());
    out->tensors.push_back(std::move(t));
  }
  if (!in.done()) return KvCorrupt("KV stream: the model section (MODL) is malformed");
  return Status::Ok();
}

Status StreamReader::ParseVElem(const std::vector<uint8_t>& p, int32_t* elem_v) {
  In in{p};
  *elem_v = in.Get<int32_t>();
  if (!in.done() || *elem_v == 0) return KvCorrupt("KV stream: the V element type section (VELM) is malformed");
  return Status::Ok();
}

// elem_v: the VELM section's value (0: none, V as K).
Status StreamReader::ParseGeometry(const std::vector<uint8_t>& p, KvGeometry* g, int32_t elem_v) {
  In in{p};
  g->n_layer = in.Get<int32_t>();
  g->n_head_kv = in.Get<int32_t>();
  g->head_dim = in.Get<int32_t>();
  g->block_size = in.Get<int32_t>();
  g->elem = in.Get<int32_t>();
  g->elem_v = elem_v;
  g->hash_fn = in.Get<uint32_t>();
  auto in_range = [](int32_t v, int32_t hi) { return v >= 1 && v <= hi; };
  if (in.bad || !in_range(g->n_layer, 4096) || !in_range(g->n_head_kv, 4096) || !in_range(g->head_dim, 65536) ||
      !in_range(g->block_size, 65536))
    return KvCorrupt("KV stream: the geometry section (GEOM) is malformed or out of range");
  LLM_RETURN_IF_ERROR(CheckElem(g->elem, g->head_dim, "K"));
  if (g->elem_v != 0) LLM_RETURN_IF_ERROR(CheckElem(g->elem_v, g->head_dim, "V"));
  if (g->hash_fn != kHashChainV1)
    return KvMismatch("KV stream: block hash function " + std::to_string(g->hash_fn) + " is unknown to this library");
  g->window.clear();
  for (int32_t l = 0; l < g->n_layer && !in.bad; ++l) g->window.push_back(in.Get<int32_t>());
  if (!in.done()) return KvCorrupt("KV stream: the geometry section (GEOM) is malformed");
  for (int32_t w : g->window)
    if (w < 0) return KvCorrupt("KV stream: negative sliding window");
  // 2 * 4 * n_layer * n_head_kv * head_dim * block_size < 2^60: no overflow
  if (g->wire().block_bytes() > kMaxBlockBytes)
    return KvCorrupt("KV stream: a block of " + std::to_string(g->wire().block_bytes()) + " bytes is larger than " +
                     std::to_string(kMaxBlockBytes));
  return Status::Ok();
}

Status StreamReader::ReadHeader(StreamHeader* out) {
  uint8_t h[16];
  LLM_RETURN_IF_ERROR(ReadExact(h, sizeof h, "the stream header"));
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0) return KvCorrupt("not a KV stream (bad magic)");
  std::memcpy(&out->version, h + 8, 4);
  uint32_t header_flags = 0;
  std::memcpy(&header_flags, h + 12, 4);
  if (out->version == 0) return KvCorrupt("KV stream: format version 0 does not exist");
  if (out->version > kVersion)
    return KvMismatch("KV stream: format version " + std::to_string(out->version) +
                      " is newer than this library reads (" + std::to_string(kVersion) + ")");
  if (header_flags != 0)
    return KvMismatch("KV stream: header flags " + std::to_string(header_flags) + " are unknown to this library");
  bool have_model = false, have_geo = false, have_velm = false;
  int32_t elem_v = 0;  // VELM's, which comes before GEOM
  out->tier = false;
  out->salt = 0;
  out->first_parent = 0;
  while (!have_model || !have_geo) {
    uint32_t tag, flags;
    uint64_t length;
    const uint64_t at = offset_;
    LLM_RETURN_IF_ERROR(ReadSectionHead(&tag, &flags, &length));
    if (tag == kTagTier && !out->tier && !have_model && !have_geo) {
      if (length != 16)
        return KvCorrupt("KV stream: the TIER section at byte " + std::to_string(at) + " is malformed");
      uint8_t t[16];
      LLM_RETURN_IF_ERROR(ReadExact(t, sizeof t, "the TIER section"));
      std::memcpy(&out->salt, t, 8);
      std::memcpy(&out->first_parent, t + 8, 8);
      out->tier = true;
    } else if (tag == kTagModel && !have_model) {
      LLM_RETURN_IF_ERROR(ReadPayload(length, &scratch_, "model"));
      LLM_RETURN_IF_ERROR(ParseModel(scratch_, &out->model));
      have_model = true;
    } else if (tag == kTagGeometry && !have_geo) {
      LLM_RETURN_IF_ERROR(ReadPayload(length, &scratch_, "geometry"));
      LLM_RETURN_IF_ERROR(ParseGeometry(scratch_, &out->geometry, elem_v));
      have_geo = true;
    } else if (tag == kTagVElem && !have_velm && !have_geo) {
      LLM_RETURN_IF_ERROR(ReadPayload(length, &scratch_, "V element type"));
      LLM_RETURN_IF_ERROR(ParseVElem(scratch_, &elem_v));
      have_velm = true;
    } else if (tag == kTagModel || tag == kTagGeometry || tag == kTagBlock || tag == kTagEnd || tag == kTagTier ||
               tag == kTagVElem) {
      return KvCorrupt("KV stream: section " + TagName(tag) + " at byte " + std::to_string(at) +
                       " comes before the model and geometry sections (or repeats one, or TIER or VELM comes after "
                       "GEOM)");
    } else if (flags & kSectionRequired) {
      return KvMismatch("KV stream: section " + TagName(tag) + " at byte " + std::to_string(at) +
                        " is required and unknown to this library (a newer writer)");
    } else {
      LLM_RETURN_IF_ERROR(Skip(length));
    }
  }
  geometry_ = out->geometry;
  salt_ = out->salt;
  last_hash_ = out->first_parent;
  have_header_ = true;
  return Status::Ok();
}

StatusOr<bool> StreamReader::NextBlock(BlockRecord* out) {
  if (!have_header_) return InternalError("StreamReader::NextBlock before ReadHeader");
  if (done_) return false;
  const KvWireLayout wire = geometry_.wire();
  const size_t n_tok = static_cast<size_t>(geometry_.block_size);
  const uint64_t want = kBlockPrefix + n_tok * 4 + static_cast<uint64_t>(wire.block_bytes()) + 8;
  while (true) {
    uint32_t tag, flags;
    uint64_t length;
    const uint64_t at = offset_;
    LLM_RETURN_IF_ERROR(ReadSectionHead(&tag, &flags, &length));
    if (tag == kTagEnd) {
      uint64_t n = 0;
      if (length != 8) return KvCorrupt("KV stream: END section at byte " + std::to_string(at) + " is malformed");
      LLM_RETURN_IF_ERROR(ReadExact(&n, 8, "the END section"));
      if (n != n_blocks_)
        return KvCorrupt("KV stream: END says " + std::to_string(n) + " blocks, the stream holds " +
                         std::to_string(n_blocks_));
      done_ = true;
      return false;
    }
    if (tag != kTagBlock) {
      if (tag == kTagModel || tag == kTagGeometry || tag == kTagTier || tag == kTagVElem)
        return KvCorrupt("KV stream: a second " + TagName(tag) + " section at byte " + std::to_string(at));
      if (flags & kSectionRequired)
        return KvMismatch("KV stream: section " + TagName(tag) + " at byte " + std::to_string(at) +
                          " is required and unknown to this library (a newer writer)");
      LLM_RETURN_IF_ERROR(Skip(length));
      continue;
    }
    if (length != want)
      return KvCorrupt("KV stream: block " + std::to_string(n_blocks_) + " at byte " + std::to_string(at) + " has " +
                       std::to_string(length) + " bytes; its geometry needs " + std::to_string(want));
    uint8_t prefix[kBlockPrefix];
    LLM_RETURN_IF_ERROR(ReadExact(prefix, sizeof prefix, "a block"));
    out->tokens.resize(n_tok);
    LLM_RETURN_IF_ERROR(ReadExact(out->tokens.data(), n_tok * 4, "a block"));
    out->kv.resize(static_cast<size_t>(wire.block_bytes()));
    LLM_RETURN_IF_ERROR(ReadExact(out->kv.data(), out->kv.size(), "a block"));
    uint64_t sum = 0;
    LLM_RETURN_IF_ERROR(ReadExact(&sum, 8, "a block"));
    if (sum != BlockChecksum(prefix, out->tokens, out->kv))
      return KvCorrupt("KV stream: block " + std::to_string(n_blocks_) + " at byte " + std::to_string(at) +
                       " fails its checksum (corrupted bytes)");
    // values no writer stores (an FP8 scale that is NaN, infinite or
    // negative): refused here, before any pool computes from them
    if (Status st = CheckKvBlockValues(wire, out->kv); !st.ok())
      return KvCorrupt("KV stream: block " + std::to_string(n_blocks_) + " at byte " + std::to_string(at) + ": " +
                       st.message());
    std::memcpy(&out->index, prefix, 4);
    std::memcpy(&out->parent, prefix + 8, 8);
    std::memcpy(&out->hash, prefix + 16, 8);
    if (out->index != n_blocks_ || out->parent != last_hash_ ||
        out->hash != BlockPool::HashBlock(out->parent, salt_, out->tokens))
      return KvCorrupt("KV stream: block " + std::to_string(n_blocks_) + " at byte " + std::to_string(at) +
                       " does not continue the prefix (index or chained hash)");
    last_hash_ = out->hash;
    ++n_blocks_;
    return true;
  }
}

// ---------------------------------------------------------------- compatibility

Status CheckCompatible(const StreamHeader& s, const ModelFingerprint& m, const KvGeometry& c) {
  const ModelFingerprint& f = s.model;
  if (f.arch != m.arch)
    return KvMismatch("KV stream is from another model: architecture '" + f.arch + "', this context runs '" + m.arch + "'");
  const size_t n = std::min(f.tensors.size(), m.tensors.size());
  for (size_t i = 0; i < n; ++i) {
    const FingerprintTensor &a = f.tensors[i], &b = m.tensors[i];
    if (a == b) continue;
    return KvMismatch("KV stream is from another model: tensor " + std::to_string(i) + " is '" + a.name + "' type " +
                      std::to_string(a.type) + " " + Dims(a.dims) + " there, '" + b.name + "' type " +
                      std::to_string(b.type) + " " + Dims(b.dims) + " here");
  }
  if (f.tensors.size() != m.tensors.size())
    return KvMismatch("KV stream is from another model: " + std::to_string(f.tensors.size()) + " tensors there, " +
                      std::to_string(m.tensors.size()) + " here");
  if (f.weights_hash != m.weights_hash)
    return KvMismatch("KV stream is from another model: same tensors, different weights (sampled-bytes hash differs)");
  const KvGeometry& g = s.geometry;
  auto field = [](const char* name, int64_t there, int64_t here) {
    return KvMismatch(std::string("KV stream has another KV geometry: ") + name + " " + std::to_string(there) +
                      " there, " + std::to_string(here) + " here");
  };
  if (g.n_layer != c.n_layer) return field("layers", g.n_layer, c.n_layer);
  if (g.n_head_kv != c.n_head_kv) return field("KV heads", g.n_head_kv, c.n_head_kv);
  if (g.head_dim != c.head_dim) return field("head dim", g.head_dim, c.head_dim);
  if (g.block_size != c.block_size) return field("block size", g.block_size, c.block_size);
  for (int32_t l = 0; l < g.n_layer; ++l) {
    if (g.window[l] != c.window[l])
      return field(("sliding window of layer " + std::to_string(l)).c_str(), g.window[l], c.window[l]);
  }
  return Status::Ok();
}

}  // namespace llm::kvstate
