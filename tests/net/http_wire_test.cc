// The HTTP/1.1 message syntax of gpushare's server (net/http_wire.h), on byte strings: requests as
// Go's net/http and curl write them, every prefix of them (incomplete, never wrong), every
// single-byte mutation (refused with a status or parsed, never a crash), limits, and chunked bodies
// fed a byte at a time.
#include "net/http_wire.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace gpushare::net::http {
namespace {

// What kube-scheduler's Go client sends (header order and spelling of net/http).
const std::string kGoRequest =
    "POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: 10.0.0.7:39999\r\nUser-Agent: "
    "Go-http-client/1.1\r\n"
    "Content-Length: 17\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n";

HeadResult Parse(std::string_view s, Limits l = {}) {
  return ParseRequestHead(s, l);
}

TEST(HttpWire, GoRequestHead) {
  HeadResult r = Parse(kGoRequest + "{\"Pod\":{}}1234567");
  ASSERT_EQ(r.kind, HeadResult::Kind::kDone) << r.refusal.reason;
  EXPECT_EQ(r.consumed, kGoRequest.size());
  EXPECT_EQ(r.head.method, "POST");
  EXPECT_EQ(r.head.path, "/gpushare-scheduler/filter");
  EXPECT_EQ(r.head.content_length, 17u);
  EXPECT_FALSE(r.head.chunked);
  EXPECT_TRUE(r.head.keep_alive);
  EXPECT_FALSE(r.head.expect_continue);
  EXPECT_EQ(r.head.Header("content-type").value_or(""), "application/json");
  EXPECT_EQ(r.head.Header("accept-encoding").value_or(""), "gzip");
}

TEST(HttpWire, EveryPrefixIsIncompleteNeverWrong) {
  for (size_t n = 0; n < kGoRequest.size(); ++n)
    EXPECT_EQ(Parse(kGoRequest.substr(0, n)).kind, HeadResult::Kind::kIncomplete) << n;
}

TEST(HttpWire, VersionsConnectionExpectAndTargets) {
  HeadResult old = Parse("GET /healthz HTTP/1.0\r\n\r\n");
  ASSERT_EQ(old.kind, HeadResult::Kind::kDone);
  EXPECT_FALSE(old.head.keep_alive);  // HTTP/1.0 closes unless asked
  HeadResult old_ka = Parse("GET /healthz HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
  EXPECT_TRUE(old_ka.head.keep_alive);
  HeadResult close =
      Parse("GET /healthz HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, close\r\n\r\n");
  EXPECT_FALSE(close.head.keep_alive);
  HeadResult curl =
      Parse("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_TRUE(curl.head.expect_continue);
  HeadResult query = Parse("GET /readyz?verbose=1 HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(query.head.path, "/readyz");
  HeadResult absolute = Parse("GET http://h:1/metrics?x HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(absolute.head.path, "/metrics");
  HeadResult bare_lf = Parse("GET /healthz HTTP/1.1\nHost: h\n\n");  // RFC 9112 §2.2 tolerates LF
  ASSERT_EQ(bare_lf.kind, HeadResult::Kind::kDone);
  HeadResult leading = Parse("\r\n\r\nGET /healthz HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_EQ(leading.kind, HeadResult::Kind::kDone);
  EXPECT_EQ(leading.head.path, "/healthz");
  HeadResult chunked = Parse("POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n");
  EXPECT_TRUE(chunked.head.chunked);
  HeadResult same =
      Parse("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\n");
  ASSERT_EQ(same.kind, HeadResult::Kind::kDone);
  EXPECT_EQ(same.head.content_length, 3u);
  HeadResult huge =
      Parse("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999\r\n\r\n");
  ASSERT_EQ(huge.kind, HeadResult::Kind::kDone);  // the server refuses it with 413
  EXPECT_EQ(huge.head.content_length, UINT64_MAX);
}

TEST(HttpWire, RefusalsSayWhyWithTheRightStatus) {
  struct Case {
    std::string request;
    int status;
    std::string words;
  };
  const std::vector<Case> cases = {
      {"POST /x HTTP/1.1\r\n\r\n", 400, "without a Host"},
      {"POST  /x HTTP/1.1\r\nHost: h\r\n\r\n", 400, "request line"},
      {"POST /x HTTP/2.0\r\nHost: h\r\n\r\n", 505, "HTTP/1.x only"},
      {"POST /x HTTP/1.1 extra\r\nHost: h\r\n\r\n", 400, "request line"},
      {"PO{T /x HTTP/1.1\r\nHost: h\r\n\r\n", 400, "bad method"},
      {"POST x HTTP/1.1\r\nHost: h\r\n\r\n", 400, "request target"},
      {"POST /x HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n", 400, "line folding"},
      {"POST /x HTTP/1.1\r\nHost h\r\n\r\n", 400, "no colon"},
      {"POST /x HTTP/1.1\r\nHo st: h\r\n\r\n", 400, "header name"},
      {"POST /x HTTP/1.1\r\nHost: h\x01\r\n\r\n", 400, "control character"},
      {"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 400, "Content-Length"},
      {"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400,
       "conflicting"},
      {"POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501,
       "only chunked"},
      {"POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
       400, "both"},
      {"POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "HTTP/1.0"},
      {"POST /x HTTP/1.1\r\nHost: h\r\nExpect: 200-ok\r\n\r\n", 417, "Expect"},
  };
  for (const Case& c : cases) {
    HeadResult r = Parse(c.request);
    ASSERT_EQ(r.kind, HeadResult::Kind::kRefused) << c.request;
    EXPECT_EQ(r.refusal.status, c.status) << c.request;
    EXPECT_NE(r.refusal.reason.find(c.words), std::string::npos)
        << c.request << " -> " << r.refusal.reason;
    EXPECT_TRUE(r.refusal.close);
  }
}

TEST(HttpWire, HeadLimits) {
  Limits l;
  l.max_head_bytes = 1024;
  l.max_headers = 10;
  std::string many = "GET / HTTP/1.1\r\nHost: h\r\n";
  for (int i = 0; i < 20; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(Parse(many + "\r\n", l).refusal.status, 431);
  // Too long without an end: refused as soon as the limit is passed, not buffered forever.
  const std::string endless = "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(2000, 'a');
  HeadResult r = Parse(endless, l);
  EXPECT_EQ(r.kind, HeadResult::Kind::kRefused);
  EXPECT_EQ(r.refusal.status, 431);
  EXPECT_EQ(Parse(std::string(5000, '\n'), l).kind, HeadResult::Kind::kRefused);
}

TEST(HttpWire, EverySingleByteMutationIsParsedOrRefusedNeverCrashes) {
  const std::string base = kGoRequest + "{\"Pod\":{}}1234567";
  std::set<int> statuses;
  size_t done = 0;
  for (size_t i = 0; i < kGoRequest.size(); ++i) {
    for (int b :
         std::initializer_list<int>{0, '\r', '\n', ' ', ':', ',', '\t', 0x7f, 0xff, 'A', '9'}) {
      std::string m = base;
      m[i] = static_cast<char>(b);
      HeadResult r = Parse(m);
      if (r.kind == HeadResult::Kind::kRefused) {
        statuses.insert(r.refusal.status);
        EXPECT_FALSE(r.refusal.reason.empty());
      } else if (r.kind == HeadResult::Kind::kDone) {
        ++done;
        EXPECT_LE(r.consumed, m.size());
      }
    }
  }
  EXPECT_GT(done, 0u);
  for (int s : statuses) EXPECT_TRUE(s == 400 || s == 417 || s == 431 || s == 501 || s == 505) << s;
}

// Feeds `body` to a decoder in pieces of `step` bytes; returns the payload or the refusal.
std::pair<ChunkedDecoder::State, std::string> Decode(std::string_view body, size_t step,
                                                     size_t max = 1 << 20, size_t* rest = nullptr,
                                                     int* status = nullptr) {
  ChunkedDecoder d(max);
  std::string out;
  size_t pos = 0;
  ChunkedDecoder::State s = ChunkedDecoder::State::kMore;
  while (pos < body.size()) {
    size_t used = 0;
    s = d.Feed(body.substr(pos, std::min(step, body.size() - pos)), &out, &used);
    pos += used;
    if (s != ChunkedDecoder::State::kMore) break;
  }
  if (rest) *rest = body.size() - pos;
  if (status && s == ChunkedDecoder::State::kError) *status = d.refusal().status;
  return {s, out};
}

TEST(HttpWire, ChunkedBodiesInAnyPieces) {
  const std::string body =
      "4\r\nWiki\r\n5;name=value\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nTrailer: "
      "x\r\n\r\nNEXT";
  for (size_t step : {1u, 2u, 3u, 7u, 64u}) {
    size_t rest = 0;
    auto [s, out] = Decode(body, step, 1 << 20, &rest);
    EXPECT_EQ(s, ChunkedDecoder::State::kDone) << step;
    EXPECT_EQ(out, "Wikipedia in\r\n\r\nchunks.") << step;
    EXPECT_EQ(rest, 4u) << step;  // "NEXT" is the next request's
  }
  EXPECT_EQ(Decode("0\r\n\r\n", 1).first, ChunkedDecoder::State::kDone);
  EXPECT_EQ(Decode("3\nabc\n0\n\n", 1).second, "abc");  // bare LF line ends
  EXPECT_EQ(Decode("3\r\nab", 1).first, ChunkedDecoder::State::kMore);
}

TEST(HttpWire, ChunkedRefusals) {
  int status = 0;
  EXPECT_EQ(Decode("x\r\n", 1, 100, nullptr, &status).first, ChunkedDecoder::State::kError);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(Decode("3\r\nabcX\r\n", 1, 100, nullptr, &status).first, ChunkedDecoder::State::kError);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(Decode("65\r\n", 1, 100, nullptr, &status).first,
            ChunkedDecoder::State::kError);  // 101 > 100
  EXPECT_EQ(status, 413);
  EXPECT_EQ(Decode("40\r\n" + std::string(64, 'a') + "\r\n40\r\n", 5, 100, nullptr, &status).first,
            ChunkedDecoder::State::kError);  // 128 in all
  EXPECT_EQ(status, 413);
  EXPECT_EQ(Decode("fffffffffffffffffff\r\n", 1, 100, nullptr, &status).first,
            ChunkedDecoder::State::kError);
  EXPECT_EQ(status, 413);
  EXPECT_EQ(Decode("1;" + std::string(5000, 'e') + "\r\n", 100, 100, nullptr, &status).first,
            ChunkedDecoder::State::kError);
  EXPECT_EQ(Decode("0\r\n" + std::string(20000, 't'), 1000, 100, nullptr, &status).first,
            ChunkedDecoder::State::kError);
  EXPECT_EQ(status, 431);
}

TEST(HttpWire, ChunkedRandomBytesNeverCrashOrOverrun) {
  std::mt19937 rng(5);
  const std::string alphabet = "0123456789abcdefABCDEF;=\r\n xz";
  for (int i = 0; i < 3000; ++i) {
    std::string s(rng() % 60, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    auto [state, out] = Decode(s, 1 + rng() % 5, 40);
    EXPECT_LE(out.size(), 40u);
  }
}

TEST(HttpWire, ResponseHead) {
  EXPECT_EQ(ResponseHead(200, "application/json", 12, false),
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n");
  EXPECT_EQ(
      ResponseHead(405, "application/json", 0, true, {{"Allow", "POST"}}),
      "HTTP/1.1 405 Method Not Allowed\r\nContent-Type: application/json\r\nContent-Length: 0\r\n"
      "Connection: close\r\nAllow: POST\r\n\r\n");
}

}  // namespace
}  // namespace gpushare::net::http
