#include "disagg/identity.h"

#include <vector>

namespace llm::disagg {

namespace {

void Put(std::vector<uint8_t>* b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b->push_back(uint8_t(v >> (8 * i)));
}
void Put(std::vector<uint8_t>* b, const std::string& s) {
  Put(b, s.size());
  b->insert(b->end(), s.begin(), s.end());
}

}  // namespace

uint64_t ModelDigest(const ModelFingerprint& fp) {
  std::vector<uint8_t> b;
  Put(&b, fp.arch);
  Put(&b, fp.tensors.size());
  for (const FingerprintTensor& t : fp.tensors) {
    Put(&b, t.name);
    Put(&b, uint64_t(uint32_t(t.type)));
    Put(&b, t.dims.size());
    for (int64_t d : t.dims) Put(&b, uint64_t(d));
  }
  Put(&b, fp.weights_hash);
  return Hash64(b.data(), b.size());
}

uint64_t GeometryDigest(const kvstate::KvGeometry& g) {
  std::vector<uint8_t> b;
  for (int32_t v : {g.n_layer, g.n_head_kv, g.head_dim, g.block_size}) Put(&b, uint64_t(uint32_t(v)));
  Put(&b, uint64_t(g.hash_fn));
  Put(&b, g.window.size());
  for (int32_t w : g.window) Put(&b, uint64_t(uint32_t(w)));
  return Hash64(b.data(), b.size());
}

Identity MakeIdentity(const ModelFingerprint& fp, const kvstate::KvGeometry& g) {
  Identity id;
  id.model_digest = ModelDigest(fp);
  id.geometry_digest = GeometryDigest(g);
  return id;
}

}  // namespace llm::disagg
