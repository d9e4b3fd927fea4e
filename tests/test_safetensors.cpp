// The safetensors reader: valid files, sharded directories, and hostile
// headers, each refused with a status and a message naming the problem.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "model/safetensors.h"

namespace llm {
namespace {

// Element i of an F32 tensor's data: a safetensors data section need not be
// 4-byte aligned (the header length is arbitrary), so read bytes.
float FloatAt(const void* data, size_t i) {
  float v;
  std::memcpy(&v, static_cast<const char*>(data) + i * sizeof v, sizeof v);
  return v;
}

// u64 length | header | data
std::string File(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + header + data;
}

StatusOr<std::unique_ptr<SafetensorsFile>> Parse(const std::string& bytes) {
  return SafetensorsFile::FromMemory(bytes.data(), bytes.size());
}

// Expects a refusal whose message contains `needle`.
void ExpectRefused(const std::string& bytes, const std::string& needle, llm_status code = LLM_ERR_MODEL_FORMAT) {
  auto f = Parse(bytes);
  ASSERT_FALSE(f.ok()) << "accepted; wanted an error containing " << needle;
  EXPECT_EQ(f.status().code(), code) << f.status().message();
  EXPECT_NE(f.status().message().find(needle), std::string::npos) << f.status().message();
}

TEST(Safetensors, ReadsTensorsAndMetadata) {
  float a[2] = {1.0f, -2.0f};
  std::string data(reinterpret_cast<const char*>(a), 8);
  data += std::string("\x80\x3f\x00\x40", 4);  // two BF16: 1.0, 2.0
  // The parsed file points into these bytes: they outlive it.
  const std::string bytes = File(R"({"__metadata__":{"format":"pt"},)"
                                 R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                 R"("b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]},)"
                                 R"("e":{"dtype":"F16","shape":[0,4],"data_offsets":[12,12]}})",
                                 data);
  auto f = Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ((*f)->tensors().size(), 3u);
  const SafetensorsTensor* t = (*f)->Find("a");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, TensorType::F32);
  EXPECT_EQ(t->shape, std::vector<int64_t>{2});
  EXPECT_EQ(FloatAt(t->data, 1), -2.0f);
  t = (*f)->Find("b");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, TensorType::BF16);
  EXPECT_EQ(t->n_elements(), 2);
  EXPECT_EQ(t->nbytes, 4u);
  EXPECT_EQ((*f)->Find("e")->nbytes, 0u);
  EXPECT_EQ((*f)->Find("__metadata__"), nullptr);
}

TEST(Safetensors, RefusesHostileHeaders) {
  const std::string d16(16, '\0');
  ExpectRefused("", "too short");
  ExpectRefused(std::string("\x05\0\0\0\0\0\0\0{}", 10), "past the end");  // truncated header
  ExpectRefused(std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8), "limit");
  ExpectRefused(File("{\"a\":", ""), "not valid JSON");
  ExpectRefused(File("[]", ""), "not a JSON object");
  // offsets past the end of the data (a truncated file)
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})", d16), "past the 16-byte");
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", d16), "begin 8 > end 4");
  // size disagrees with dtype x shape
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", d16), "need 12");
  // overlapping tensors
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                     d16),
                "overlap");
  // holes and trailing bytes (room for a hidden second payload)
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", d16), "hole before 'a'");
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", d16), "8 bytes after the last");
  // huge dims: the product overflows 64 bits; one dim past int64
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})", d16),
                "overflows");
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[1e30],"data_offsets":[0,16]}})", d16), "non-negative integer");
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", d16), "non-negative integer");
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})", d16), "dims");
  // names: invalid UTF-8 (written as raw bytes: the JSON parser takes them
  // inside strings), empty, duplicated
  ExpectRefused(File("{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", d16), "UTF-8");
  ExpectRefused(File(R"({"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", d16), "empty name");
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                     R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                     d16),
                "twice");
  // dtypes this build does not read
  ExpectRefused(File(R"({"a":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", d16), "I64",
                LLM_ERR_UNSUPPORTED);
  ExpectRefused(File(R"({"a":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", d16), "not supported",
                LLM_ERR_UNSUPPORTED);
  // malformed fields
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", d16), "pair");
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", d16), "unknown field");
  ExpectRefused(File(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", d16), "dtype");
  ExpectRefused(File(R"({"__metadata__":{"k":1}})", d16), "__metadata__");
}

class TempDir {
 public:
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "llm_st_XXXXXX").string();
    EXPECT_NE(mkdtemp(t.data()), nullptr);
    path_ = t;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  void Write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path_ + "/" + name, std::ios::binary) << bytes;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string OneTensor(const std::string& name, float v) {
  return File(R"({")" + name + R"(":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
              std::string(reinterpret_cast<const char*>(&v), 4));
}

TEST(Safetensors, ReadsShardedDirectory) {
  TempDir d;
  d.Write("s1.safetensors", OneTensor("x", 1.0f));
  d.Write("s2.safetensors", OneTensor("y", 2.0f));
  d.Write("model.safetensors.index.json",
          R"({"metadata":{"total_size":8},"weight_map":{"x":"s1.safetensors","y":"s2.safetensors"}})");
  auto set = SafetensorsSet::OpenDir(d.path());
  ASSERT_TRUE(set.ok()) << set.status().message();
  ASSERT_NE((*set)->Find("y"), nullptr);
  EXPECT_EQ(FloatAt((*set)->Find("y")->data, 0), 2.0f);
  EXPECT_EQ((*set)->All().size(), 2u);
}

TEST(Safetensors, RefusesInconsistentShards) {
  auto refused = [](const TempDir& d, const std::string& needle) {
    auto set = SafetensorsSet::OpenDir(d.path());
    ASSERT_FALSE(set.ok());
    EXPECT_NE(set.status().message().find(needle), std::string::npos) << set.status().message();
  };
  {
    TempDir d;  // mapped to the wrong shard
    d.Write("s1.safetensors", OneTensor("x", 1.0f));
    d.Write("s2.safetensors", OneTensor("y", 2.0f));
    d.Write("model.safetensors.index.json", R"({"weight_map":{"x":"s2.safetensors","y":"s2.safetensors"}})");
    refused(d, "not in its shard");
  }
  {
    TempDir d;  // a tensor in a shard that the map leaves out
    d.Write("s1.safetensors", OneTensor("x", 1.0f));
    d.Write("s2.safetensors", OneTensor("x", 2.0f));
    d.Write("model.safetensors.index.json", R"({"weight_map":{"x":"s1.safetensors","z":"s2.safetensors"}})");
    refused(d, "not in its shard");
  }
  {
    TempDir d;  // the same tensor in two shards
    d.Write("s1.safetensors", OneTensor("x", 1.0f));
    d.Write("s2.safetensors", File(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                   R"("y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                   std::string(8, '\0')));
    d.Write("model.safetensors.index.json", R"({"weight_map":{"x":"s1.safetensors","y":"s2.safetensors"}})");
    refused(d, "not mapped to this shard");
  }
  {
    TempDir d;  // a shard path leading out of the directory
    d.Write("model.safetensors.index.json", R"({"weight_map":{"x":"../s1.safetensors"}})");
    refused(d, "not a file name");
  }
  {
    TempDir d;  // a missing shard
    d.Write("model.safetensors.index.json", R"({"weight_map":{"x":"gone.safetensors"}})");
    refused(d, "gone.safetensors");
  }
  {
    TempDir d;
    refused(d, "neither");
  }
}

}  // namespace
}  // namespace llm
