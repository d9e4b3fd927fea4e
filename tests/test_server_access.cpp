// llm-server's access rules (samples/server/access.h): API keys and the
// Host/Origin check against DNS rebinding. Pure: no socket, no model.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "access.h"

namespace server {
namespace {

AccessDecision Check(const AccessPolicy& p, const char* path, const char* host, const char* origin = "",
                     const char* auth = "", const char* xkey = "") {
  return CheckAccess(p, path, host, origin, auth, xkey);
}

TEST(ServerAccess, LoopbackServerAnswersLocalHostNamesOnly) {
  AccessPolicy p;  // bound to 127.0.0.1, no key
  for (const char* h : {"127.0.0.1", "127.0.0.1:8080", "localhost", "LOCALHOST:80", "[::1]:8080", "127.1.2.3",
                        "app.localhost:3000"})
    EXPECT_EQ(Check(p, "/v1/models", h).http_status, 0) << h;
  for (const char* h : {"evil.example:8080", "evil.example", "127.0.0.1.evil.example", "localhost.evil.example",
                        "0.0.0.0", "", "128.0.0.1", "127.0.0", "[::2]"})
    EXPECT_EQ(Check(p, "/v1/models", h).http_status, 403) << h;
  // a page elsewhere posting to the local name (Origin is that page's)
  EXPECT_EQ(Check(p, "/v1/chat/completions", "127.0.0.1:8080", "http://evil.example").http_status, 403);
  EXPECT_EQ(Check(p, "/v1/chat/completions", "127.0.0.1:8080", "http://localhost:3000").http_status, 0);
  EXPECT_EQ(Check(p, "/v1/chat/completions", "127.0.0.1:8080", "null").http_status, 0);
  p.allowed_hosts = {"my-box.lan"};
  EXPECT_EQ(Check(p, "/health", "my-box.lan:8080").http_status, 0);
  EXPECT_EQ(Check(p, "/health", "my-box.lan:8080", "https://MY-BOX.lan").http_status, 0);
  EXPECT_EQ(Check(p, "/health", "other.lan").http_status, 403);
}

TEST(ServerAccess, ExposedServerChecksOnlyItsAllowList) {
  AccessPolicy p;
  p.loopback_bind = false;
  EXPECT_EQ(Check(p, "/v1/models", "anything.example").http_status, 0);
  p.allowed_hosts = {"api.example"};
  EXPECT_EQ(Check(p, "/v1/models", "api.example:443").http_status, 0);
  EXPECT_EQ(Check(p, "/v1/models", "anything.example").http_status, 403);
}

TEST(ServerAccess, KeysAreNeededEverywhereButHealth) {
  AccessPolicy p;
  p.api_keys = {"sk-first", "sk-second"};
  for (const char* path : {"/v1/models", "/v1/chat/completions", "/v1/completions", "/v1/stats", "/metrics", "/nope"}) {
    EXPECT_EQ(Check(p, path, "localhost").http_status, 401) << path;
    EXPECT_EQ(Check(p, path, "localhost", "", "Bearer sk-firs").http_status, 401) << path;
    EXPECT_EQ(Check(p, path, "localhost", "", "Bearer sk-first2").http_status, 401) << path;
    EXPECT_EQ(Check(p, path, "localhost", "", "Basic sk-first").http_status, 401) << path;
    EXPECT_EQ(Check(p, path, "localhost", "", "Bearer sk-first").http_status, 0) << path;
    EXPECT_EQ(Check(p, path, "localhost", "", "bearer  sk-second ").http_status, 0) << path;
    EXPECT_EQ(Check(p, path, "localhost", "", "", "sk-second").http_status, 0) << path;
  }
  EXPECT_EQ(Check(p, "/health", "localhost").http_status, 0);
  const AccessDecision d = Check(p, "/v1/models", "localhost", "", "Bearer sk-wrong-key");
  EXPECT_EQ(d.message.find("sk-"), std::string::npos) << "a message never repeats a key: " << d.message;
  // the Host check comes first: a rebinding page learns nothing about keys
  EXPECT_EQ(Check(p, "/v1/models", "evil.example", "", "Bearer sk-first").http_status, 403);
}

TEST(ServerAccess, KeyFile) {
  const std::string path = testing::TempDir() + "/keys.txt";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("# keys\n\n  sk-a  \nsk-b\r\n", f);
  std::fclose(f);
  std::vector<std::string> keys;
  std::string error;
  ASSERT_TRUE(ReadKeyFile(path, &keys, &error)) << error;
  EXPECT_EQ(keys, (std::vector<std::string>{"sk-a", "sk-b"}));
  EXPECT_FALSE(ReadKeyFile(path + ".absent", &keys, &error));
  f = std::fopen(path.c_str(), "w");
  std::fputs("# none\n", f);
  std::fclose(f);
  EXPECT_FALSE(ReadKeyFile(path, &keys, &error));
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackAddress("localhost"));
  EXPECT_TRUE(IsLoopbackAddress("::1"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackAddress("192.168.1.2"));
}

}  // namespace
}  // namespace server
