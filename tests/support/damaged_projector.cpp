#include "support/damaged_projector.h"

#include <gtest/gtest.h>

#include "model/gguf.h"
#include "model/vision_weights.h"

namespace llm::test {

std::string Patched(const std::string& good, const std::string& from, const std::string& to) {
  std::string s = good;
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

Status OpenProjectorBytes(const std::string& bytes) {
  auto f = GgufFile::FromMemory(bytes.data(), bytes.size());
  if (!f.ok()) return f.status();
  return VisionModel::FromFile(std::move(*f)).status();
}

}  // namespace llm::test
