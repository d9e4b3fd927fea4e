// HttpRequestComplete: when the connection gate hands a parked connection to
// a worker (samples/server/request_peek.h).
#include <gtest/gtest.h>

#include <string>

#include "request_peek.h"

using server::HttpRequestComplete;

namespace {

constexpr size_t kCap = 64 << 10;

TEST(RequestPeek, HeadStillArriving) {
  EXPECT_FALSE(HttpRequestComplete("", kCap));
  EXPECT_FALSE(HttpRequestComplete("GET / HTTP/1.1\r\nHost: x\r\n", kCap));
  EXPECT_TRUE(HttpRequestComplete("GET / HTTP/1.1\r\nHost: x\r\n\r\n", kCap));
}

TEST(RequestPeek, BodyByContentLength) {
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nCONTENT-length:  \t5\r\n\r\n";
  EXPECT_FALSE(HttpRequestComplete(head, kCap));
  EXPECT_FALSE(HttpRequestComplete(head + "abcd", kCap));
  EXPECT_TRUE(HttpRequestComplete(head + "abcde", kCap));
  EXPECT_TRUE(HttpRequestComplete(head + "abcdef", kCap));  // pipelined bytes after it
}

TEST(RequestPeek, WorkerReadsWhatItMustAnswerItself) {
  // A body larger than the peek buffer, Expect: 100-continue, chunked (no
  // length), a malformed or absurd length: the worker takes over at once.
  EXPECT_TRUE(HttpRequestComplete("POST / HTTP/1.1\r\nContent-Length: 70000\r\n\r\n", kCap));
  EXPECT_TRUE(HttpRequestComplete("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n", kCap));
  EXPECT_TRUE(HttpRequestComplete("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", kCap));
  EXPECT_TRUE(HttpRequestComplete("POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n", kCap));
  EXPECT_TRUE(HttpRequestComplete("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", kCap));
  EXPECT_TRUE(HttpRequestComplete(std::string(kCap, 'a'), kCap));  // a full buffer, no head yet
}

TEST(RequestPeek, HeaderNameMustStartALine) {
  // "x-content-length" is another header; the request has no body.
  EXPECT_TRUE(HttpRequestComplete("POST / HTTP/1.1\r\nX-Content-Length: 50\r\n\r\n", kCap));
  // A Content-Length in the body is not the head's.
  EXPECT_TRUE(HttpRequestComplete("POST / HTTP/1.1\r\nHost: x\r\n\r\n\r\nContent-Length: 50\r\n", kCap));
}

}  // namespace
