// Where tests find the bundled models and the reference data.
#pragma once

#include <cstdlib>
#include <string>

namespace llm::test {

// The repository root (where models/ and tests/data/ live).
std::string RepoDir();
// The shared reference folder beside the repository (../shared), or
// $LLM_SHARED_DIR when set.
std::string SharedDir();
// True when SharedDir() exists. Tests that need it call LLM_REQUIRE_SHARED():
// they skip on a consumer's checkout without it, but fail under CI (CI=true),
// where ../shared is always present.
bool HaveShared();
// Reads a whole file; empty string if missing (the caller asserts).
std::string ReadFile(const std::string& path);

}  // namespace llm::test

#define LLM_REQUIRE_SHARED()                                                    \
  do {                                                                          \
    if (!::llm::test::HaveShared()) {                                           \
      if (std::getenv("CI")) FAIL() << "../shared is missing under CI";         \
      GTEST_SKIP() << "reference data folder ../shared not found";              \
    }                                                                           \
  } while (0)
