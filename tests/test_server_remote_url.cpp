// llm-server's checks on remote image URLs (samples/server/remote_url.h):
// the URL parser, redirect Locations, the host allow-list and the address
// check against SSRF. Pure: no socket, no DNS, no model.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "remote_url.h"

namespace server {
namespace {

RemoteUrl Parsed(const std::string& url) {
  RemoteUrl u;
  std::string problem;
  EXPECT_TRUE(ParseRemoteUrl(url, &u, &problem)) << url << ": " << problem;
  return u;
}

std::string Problem(const std::string& url) {
  RemoteUrl u;
  std::string problem;
  EXPECT_FALSE(ParseRemoteUrl(url, &u, &problem)) << url << " parsed as " << u.Text();
  return problem;
}

TEST(RemoteUrl, ParsesSchemeHostPortAndTarget) {
  RemoteUrl u = Parsed("http://example.com/cat.png");
  EXPECT_FALSE(u.https);
  EXPECT_EQ(u.host, "example.com");
  EXPECT_EQ(u.port, 80);
  EXPECT_EQ(u.target, "/cat.png");
  u = Parsed("HTTPS://Img.Example.COM./a/b.jpg?w=64&h=64#frag");
  EXPECT_TRUE(u.https);
  EXPECT_EQ(u.host, "img.example.com");
  EXPECT_EQ(u.port, 443);
  EXPECT_EQ(u.target, "/a/b.jpg?w=64&h=64");  // the fragment is not sent
  u = Parsed("http://127.0.0.1:8765");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 8765);
  EXPECT_EQ(u.target, "/");
  u = Parsed("http://[::1]:9000?x=1");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 9000);
  EXPECT_EQ(u.target, "/?x=1");
  EXPECT_EQ(u.Text(), "http://[::1]:9000/?x=1");
  EXPECT_EQ(Parsed("https://a.b:443/%41%2f").Text(), "https://a.b/%41%2f");
  EXPECT_EQ(Parsed("http://under_score.example/").host, "under_score.example");
}

TEST(RemoteUrl, RefusesUserinfoOddSchemesAndOddBytes) {
  EXPECT_NE(Problem("http://user:pass@example.com/a.png").find("user@host"), std::string::npos);
  EXPECT_NE(Problem("http://user@example.com/a.png").find("user@host"), std::string::npos);
  EXPECT_NE(Problem("http://example.com@127.0.0.1/").find("user@host"), std::string::npos);
  for (const char* u : {"ftp://example.com/a.png", "file:///etc/passwd", "gopher://x/", "http:/example.com/",
                        "httpx://example.com/", "//example.com/a.png", "example.com/a.png", ""})
    EXPECT_NE(Problem(u).find("only http:// and https://"), std::string::npos) << u;
  for (const char* u : {"http://exa mple.com/", "http://example.com/a b.png", "http://example.com/\x7f",
                        "http://example.com/\xc3\xa9.png", "http://example.com/\n"})
    EXPECT_NE(Problem(u).find("percent-encode"), std::string::npos) << u;
  for (const char* u : {"http:///a.png", "http://./", "http://a..b/", "http://%65xample.com/", "http://exa!mple/",
                        "http://.example.com/"})
    EXPECT_NE(Problem(u).find("host"), std::string::npos) << u;
  for (const char* u : {"http://example.com:0/", "http://example.com:65536/", "http://example.com:/",
                        "http://example.com:8o/", "http://example.com:000080/", "http://[::1]:/",
                        "http://[::1]:9:1]:9elhttelhtt::4.16169.4png", "http://example.com:99999999999999999999/"})
    EXPECT_NE(Problem(u).find("port"), std::string::npos) << u;
  for (const char* u : {"http://[::1/", "http://[fe80::1%25eth0]/", "http://[::1]x/", "http://[zz::1]/"})
    EXPECT_NE(Problem(u).find("IPv6"), std::string::npos) << u;
  EXPECT_NE(Problem("http://example.com/a%2").find("%XX"), std::string::npos);
  EXPECT_NE(Problem("http://example.com/a%g0").find("%XX"), std::string::npos);
  EXPECT_NE(Problem("http://example.com/<script>").find("percent-encode"), std::string::npos);
  EXPECT_NE(Problem("http://example.com/" + std::string(kMaxRemoteUrlBytes, 'a')).find("longer"),
            std::string::npos);
  EXPECT_NE(Problem("http://" + std::string(64, 'a') + ".com/").find("host"), std::string::npos);  // a 64-byte label
}

TEST(RemoteUrl, ResolvesRedirectLocations) {
  const RemoteUrl base = Parsed("https://img.example.com:8443/dir/sub/cat.png?size=2");
  std::string out;
  ASSERT_TRUE(ResolveLocation(base, "http://other.example/x.png", &out));
  EXPECT_EQ(out, "http://other.example/x.png");
  ASSERT_TRUE(ResolveLocation(base, "//cdn.example/y.png", &out));
  EXPECT_EQ(out, "https://cdn.example/y.png");
  ASSERT_TRUE(ResolveLocation(base, "/root.png", &out));
  EXPECT_EQ(out, "https://img.example.com:8443/root.png");
  ASSERT_TRUE(ResolveLocation(base, "dog.png", &out));
  EXPECT_EQ(out, "https://img.example.com:8443/dir/sub/dog.png");
  ASSERT_TRUE(ResolveLocation(base, "?size=3", &out));
  EXPECT_EQ(out, "https://img.example.com:8443/dir/sub/cat.png?size=3");
  ASSERT_TRUE(ResolveLocation(base, "file:///etc/passwd", &out));  // absolute: ParseRemoteUrl refuses it next
  RemoteUrl u;
  std::string problem;
  EXPECT_FALSE(ParseRemoteUrl(out, &u, &problem));
  EXPECT_FALSE(ResolveLocation(base, "", &out));
  EXPECT_FALSE(ResolveLocation(base, std::string(kMaxRemoteUrlBytes + 1, 'a'), &out));
}

TEST(RemoteUrl, AllowListMatchesExactCanonicalHosts) {
  const std::vector<std::string> allowed = {CanonicalHost("Images.Example.com."), CanonicalHost("127.0.0.1"),
                                            CanonicalHost("[0:0::1]")};
  EXPECT_EQ(allowed[0], "images.example.com");
  EXPECT_EQ(allowed[2], "::1");
  EXPECT_TRUE(HostListed(Parsed("http://IMAGES.example.COM/a").host, allowed));
  EXPECT_TRUE(HostListed(Parsed("http://127.0.0.1:9/a").host, allowed));
  EXPECT_TRUE(HostListed(Parsed("http://[::1]:9/a").host, allowed));
  EXPECT_FALSE(HostListed(Parsed("http://cdn.images.example.com/a").host, allowed));
  EXPECT_FALSE(HostListed(Parsed("http://example.com/a").host, allowed));
  EXPECT_FALSE(HostListed(Parsed("http://images.example.com.evil.example/a").host, allowed));
  EXPECT_FALSE(HostListed(Parsed("http://localhost/a").host, allowed));
  EXPECT_FALSE(HostListed("example.com", {}));
}

TEST(RemoteUrl, RefusesAddressesThatAreNotPublic) {
  struct Case {
    const char* ip;
    const char* kind;
  };
  for (const Case& c : std::vector<Case>{{"127.0.0.1", "loopback"},
                                         {"127.255.0.9", "loopback"},
                                         {"10.1.2.3", "private"},
                                         {"172.16.0.1", "private"},
                                         {"172.31.255.255", "private"},
                                         {"192.168.1.1", "private"},
                                         {"169.254.169.254", "link-local"},  // cloud metadata
                                         {"100.64.0.1", "shared"},
                                         {"0.0.0.0", "unspecified"},
                                         {"224.0.0.1", "multicast"},
                                         {"255.255.255.255", "reserved"},
                                         {"::1", "loopback"},
                                         {"::", "unspecified"},
                                         {"fe80::1", "link-local"},
                                         {"fd00::1", "private"},
                                         {"fec0::1", "site-local"},
                                         {"ff02::1", "multicast"},
                                         {"::ffff:127.0.0.1", "loopback"},
                                         {"::ffff:169.254.169.254", "link-local"},
                                         {"64:ff9b::10.0.0.1", "private"},
                                         {"2002:c0a8:0101::1", "private"},
                                         {"::127.0.0.1", "loopback"}}) {
    std::string why;
    EXPECT_FALSE(AddressIsPublic(c.ip, &why)) << c.ip;
    EXPECT_NE(why.find(c.kind), std::string::npos) << c.ip << ": " << why;
  }
  for (const char* ip : {"8.8.8.8", "1.1.1.1", "172.15.255.255", "172.32.0.1", "100.128.0.1", "169.253.0.1",
                         "2606:4700::1111", "2001:4860:4860::8888", "::ffff:8.8.8.8", "2002:0808:0808::1"}) {
    std::string why;
    EXPECT_TRUE(AddressIsPublic(ip, &why)) << ip << ": " << why;
  }
  std::string why;
  EXPECT_FALSE(AddressIsPublic("example.com", &why));
  EXPECT_FALSE(AddressIsPublic("", &why));
}

}  // namespace
}  // namespace server
