// Where tests find the bundled models and the reference data.
#pragma once

#include <string>

namespace llm::test {

// The repository root (where models/ and tests/data/ live).
std::string RepoDir();
// tests/data below the repository root: every reference file a test reads
// (llama.cpp's outputs and vocabularies, tokenizer.json files; origins in
// each folder's README.md). A clone has all of it, so a test whose file is
// missing fails rather than skips.
std::string DataDir();
// Reads a whole file; empty string if missing (the caller asserts).
std::string ReadFile(const std::string& path);

}  // namespace llm::test
