#include "support/real_models.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "support/test_paths.h"

namespace llm::test {

std::string RealModelPath(const RealModel& m) {
  if (const char* p = std::getenv(m.env)) return p;
  return RepoDir() + m.rel_path;
}

std::unique_ptr<Model> LoadRealModel(const RealModel& m, std::string* why) {
  const std::string path = RealModelPath(m);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    *why = std::string(m.name) + " not fetched (" + path + "); run scripts/fetch-models.sh";
    return nullptr;
  }
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec || size != m.bytes) {
    *why = path + " has " + std::to_string(size) + " bytes, expected " + std::to_string(m.bytes) + " (" +
           m.origin + ")";
    return nullptr;
  }
  auto model = Model::Load(path.c_str());
  if (!model.ok()) {
    *why = "cannot load " + path + ": " + model.status().message();
    return nullptr;
  }
  return std::move(model).value();
}

Json LoadReferenceJson(const std::string& name) {
  auto doc = ParseJson(ReadFile(RepoDir() + "/tests/data/" + name + ".json"));
  EXPECT_TRUE(doc.ok()) << doc.status().message();
  return doc.ok() ? std::move(doc).value() : Json();
}

std::vector<int32_t> JsonInts(const Json& a) {
  std::vector<int32_t> v;
  for (const Json& x : a.array()) v.push_back(static_cast<int32_t>(x.as_int()));
  return v;
}

}  // namespace llm::test
