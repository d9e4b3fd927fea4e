// The CPU backend drops the mapped file pages of the weights it packs
// (pack_weights.cpp, MmapFile::ReleasePages): the packed copy and the
// original must not both stay resident, and the model must compute the same
// logits after the release as from an unmapped copy of the same file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/gguf.h"
#include "model/weights.h"
#include "support/gguf_writer.h"

namespace llm {
namespace {

// Resident kB of the mapping that holds `p`, from /proc/self/smaps; -1 where
// that file cannot be read (not Linux).
long ResidentKbOfMapping(const void* p) {
  std::ifstream f("/proc/self/smaps");
  if (!f) return -1;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool in = false;
  while (std::getline(f, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's header line
      in = addr >= lo && addr < hi;
      continue;
    }
    long kb = 0;
    if (in && std::sscanf(line.c_str(), "Rss: %ld kB", &kb) == 1) return kb;
  }
  return -1;
}

std::vector<float> Prefill(Backend& b, int32_t n_vocab) {
  std::vector<int32_t> tokens(20), table(4);
  std::iota(table.begin(), table.end(), 0);
  for (int i = 0; i < 20; ++i) tokens[i] = 1 + (i * 37) % (n_vocab - 1);
  BatchSeq s;
  s.n_tokens = 20;
  s.block_table = table;
  const int32_t row = 19;
  Batch batch;
  batch.tokens = tokens;
  batch.seqs = std::span<const BatchSeq>(&s, 1);
  batch.logit_rows = std::span<const int32_t>(&row, 1);
  std::vector<float> logits(n_vocab);
  Status st = b.Forward(batch, logits.data());
  EXPECT_TRUE(st.ok()) << st.message();
  return logits;
}

TEST(WeightRelease, PackedMatricesLeaveTheResidentSet) {
  // Q8_0 matrices (all packed) of 2 x (4 x 256·256 + 3 x 256·1024) + the
  // classifier 1024 x 256: about 2.9 MB, against a few kB of norms.
  test::TinyLlamaOptions o;
  o.n_vocab = 1024;
  o.n_embd = 256;
  o.n_ff = 1024;
  o.n_head = 4;
  o.n_head_kv = 4;
  o.matrix_type = TensorType::Q8_0;
  const std::string bytes = test::MakeTinyLlama(o).Serialize();
  const std::string path = ::testing::TempDir() + "llmrt_release_" + std::to_string(::getpid()) + ".gguf";
  std::ofstream(path, std::ios::binary) << bytes;

  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  std::remove(path.c_str());  // the mapping keeps the file
  auto config = ModelConfig::FromGguf(*file.value());
  ASSERT_TRUE(config.ok()) << config.status().message();
  auto weights = ModelWeights::FromGguf(*file.value(), config.value());
  ASSERT_TRUE(weights.ok()) << weights.status().message();
  EXPECT_TRUE(weights.value().file_mapped);

  // Fault every page of the mapping in, as a load that reads the file does.
  const auto* base = static_cast<const volatile uint8_t*>(file.value()->data());
  unsigned sum = 0;
  for (size_t i = 0; i < file.value()->size(); i += 512) sum += base[i];
  (void)sum;
  const long before = ResidentKbOfMapping(file.value()->data());
  if (before < 0) GTEST_SKIP() << "no /proc/self/smaps";
  EXPECT_GT(before, static_cast<long>(bytes.size() / 1024) * 9 / 10);

  auto mapped = CreateCpuBackend(config.value(), weights.value(), KvCacheSpec{16, 4}, 2);
  ASSERT_TRUE(mapped.ok()) << mapped.status().message();
  const long after = ResidentKbOfMapping(file.value()->data());
  // Left resident: the header, the norms, pages shared by two tensors and
  // the token embedding rows (gathered, never packed as such: here it is
  // not the classifier, which has its own output.weight) - under a third.
  EXPECT_LT(after, before - static_cast<long>(bytes.size() / 1024) * 2 / 3)
      << "resident kB of the file mapping: " << before << " before packing, " << after << " after";

  // The same file from memory (not a mapping: nothing released) computes the
  // same logits, and the mapped backend still does after reading the pages
  // it dropped back in.
  auto mem = GgufFile::FromMemory(bytes.data(), bytes.size());
  ASSERT_TRUE(mem.ok());
  auto mem_weights = ModelWeights::FromGguf(*mem.value(), config.value());
  ASSERT_TRUE(mem_weights.ok());
  EXPECT_FALSE(mem_weights.value().file_mapped);
  auto unmapped = CreateCpuBackend(config.value(), mem_weights.value(), KvCacheSpec{16, 4}, 2);
  ASSERT_TRUE(unmapped.ok());
  const std::vector<float> a = Prefill(*mapped.value(), o.n_vocab), b = Prefill(*unmapped.value(), o.n_vocab);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "logit " << i;
}

}  // namespace
}  // namespace llm
