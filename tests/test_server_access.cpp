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
  return CheckAccess(p, "GET", path, host, origin, auth, xkey);
}

std::string Header(const std::vector<std::pair<std::string, std::string>>& h, const char* name) {
  for (const auto& kv : h)
    if (kv.first == name) return kv.second;
  return "<none>";
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

TEST(ServerAccess, CorsDefaultsToLocalOriginsAndAllowedHosts) {
  AccessPolicy p;
  p.allowed_hosts = {"my-box.lan"};
  for (const char* o : {"http://localhost", "http://localhost:8080", "http://127.0.0.1:3000", "http://[::1]",
                        "http://[::1]:3000", "https://my-box.lan", "localhost"})
    EXPECT_TRUE(CorsAllowed(p, o)) << o;
  for (const char* o : {"http://evil.com", "http://localhost.evil.com", "http://notlocalhost", "null", "",
                        "http://127.0.0.1.evil.com"})
    EXPECT_FALSE(CorsAllowed(p, o)) << o;
  auto h = CorsHeaders(p, "http://localhost:8080", false);
  EXPECT_EQ(Header(h, "Access-Control-Allow-Origin"), "http://localhost:8080");
  EXPECT_EQ(Header(h, "Vary"), "Origin");
  EXPECT_EQ(Header(h, "Access-Control-Allow-Methods"), "<none>");  // only on a preflight
  EXPECT_TRUE(CorsHeaders(p, "http://evil.com", false).empty());
  h = CorsHeaders(p, "http://evil.com", true);  // a refused preflight says nothing of the origin
  EXPECT_EQ(Header(h, "Access-Control-Allow-Origin"), "<none>");
  EXPECT_EQ(Header(h, "Access-Control-Allow-Methods"), "GET, POST, DELETE, OPTIONS");
}

TEST(ServerAccess, CorsOriginsList) {
  AccessPolicy p;
  p.cors_origins = {"localhost"};
  EXPECT_TRUE(CorsAllowed(p, "http://127.0.0.1:3000"));
  EXPECT_FALSE(CorsAllowed(p, "http://web.mydomain.fr"));
  p.cors_origins = {"web.mydomain.fr", "https://app.example:8443"};
  EXPECT_TRUE(CorsAllowed(p, "http://web.mydomain.fr"));
  EXPECT_TRUE(CorsAllowed(p, "https://WEB.mydomain.fr:9000"));
  EXPECT_TRUE(CorsAllowed(p, "https://app.example:8443"));
  EXPECT_FALSE(CorsAllowed(p, "https://app.example:8444"));
  EXPECT_FALSE(CorsAllowed(p, "http://app.example:8443"));
  EXPECT_FALSE(CorsAllowed(p, "http://localhost"));  // the list replaces the default
  // an allowed origin passes the Origin check of a loopback server, others still 403
  EXPECT_EQ(Check(p, "/v1/chat/completions", "127.0.0.1:8080", "http://web.mydomain.fr").http_status, 0);
  EXPECT_EQ(Check(p, "/v1/chat/completions", "127.0.0.1:8080", "http://evil.com").http_status, 403);
  p.cors_origins = {"*"};
  EXPECT_TRUE(CorsAllowed(p, "http://evil.com"));
  EXPECT_EQ(Check(p, "/v1/chat/completions", "127.0.0.1:8080", "http://evil.com").http_status, 0);
  EXPECT_EQ(Check(p, "/v1/chat/completions", "evil.com", "http://evil.com").http_status, 403);  // Host still checked
}

TEST(ServerAccess, PreflightNeedsNoKeyButAnAllowedHost) {
  AccessPolicy p;
  p.api_keys = {"sk-1"};
  EXPECT_EQ(CheckAccess(p, "OPTIONS", "/v1/chat/completions", "127.0.0.1:8080", "http://evil.com", "", "").http_status,
            0);
  EXPECT_EQ(CheckAccess(p, "OPTIONS", "/v1/chat/completions", "evil.com", "http://evil.com", "", "").http_status, 403);
  EXPECT_EQ(CheckAccess(p, "POST", "/v1/chat/completions", "127.0.0.1:8080", "http://localhost", "", "").http_status,
            401);
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
