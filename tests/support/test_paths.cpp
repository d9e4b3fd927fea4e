#include "support/test_paths.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace llm::test {

std::string RepoDir() {
  if (const char* d = std::getenv("LLM_SOURCE_DIR")) return d;
  return LLM_SOURCE_DIR;
}

std::string SharedDir() {
  if (const char* d = std::getenv("LLM_SHARED_DIR")) return d;
  return RepoDir() + "/../shared";
}

bool HaveShared() { return std::filesystem::is_directory(SharedDir() + "/golden"); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace llm::test
