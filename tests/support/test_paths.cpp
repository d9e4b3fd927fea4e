#include "support/test_paths.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace llm::test {

std::string RepoDir() {
  if (const char* d = std::getenv("LLM_SOURCE_DIR")) return d;
  return LLM_SOURCE_DIR;
}

std::string DataDir() { return RepoDir() + "/tests/data"; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace llm::test
