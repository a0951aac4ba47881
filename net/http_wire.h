// HTTP/1.1 message syntax for gpushare's own server (net/http_server.h; RFC 9112), without
// I/O: the request head parser, the chunked-body decoder and the response head encoder. The server
// (http_server.cc) owns the sockets; everything that decides what bytes mean is here, so it is
// tested on byte strings (every prefix, every single-byte mutation) without a socket.
//
// Why not cpp-httplib's server: it reads a body 4 KiB at a time with a poll() before every
// read, which costs more than the decision itself for the 200 KB requests kube-scheduler sends
// at 5,000 nodes (docs/benchmarks.md), and it gzips replies for any client that accepts gzip.
//
// Only what an extender needs is accepted: origin-form targets, Content-Length or chunked
// bodies, no other transfer codings, no obsolete line folding. Everything else is an error
// with the status to answer and words that say why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpushare::net::http {

struct Limits {
  size_t max_head_bytes = 64 * 1024;  // request line + headers + blank line
  size_t max_headers = 100;
  size_t max_body_bytes = 8u << 20;
};

struct RequestHead {
  std::string method;                                        // as sent (methods are case-sensitive)
  std::string target;                                        // as sent
  std::string path;                                          // target without the query
  int minor_version = 1;                                     // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed

  // The body: none, a length, or chunked. The length is not checked against a limit here
  // (UINT64_MAX when the number does not fit): the server refuses it with 413.
  bool chunked = false;
  uint64_t content_length = 0;
  bool keep_alive = true;        // after this request (version default, Connection header)
  bool expect_continue = false;  // "Expect: 100-continue"

  // The first value of header `name` (lower case), if any.
  std::optional<std::string_view> Header(std::string_view name) const;
};

// A request the server must refuse: the status, and why in words. `close`: the connection
// cannot be read any further (the message's end is unknown).
struct Refusal {
  int status = 400;
  std::string reason;
  bool close = true;
};

// Outcome of parsing the head at the start of a buffer.
struct HeadResult {
  enum class Kind { kIncomplete, kDone, kRefused } kind = Kind::kIncomplete;
  size_t consumed = 0;  // bytes of the head, including the blank line (kDone)
  RequestHead head;     // kDone
  Refusal refusal;      // kRefused
};
// Parses a request head from the start of `buf` (leading blank lines are skipped, as RFC 9112
// §2.2 allows). kIncomplete while no blank line has arrived and the head is within the limits.
HeadResult ParseRequestHead(std::string_view buf, const Limits& limits);

// Incremental decoder of a chunked body (RFC 9112 §7.1): feed it bytes as they arrive. It
// appends the payload to `out` and stops at the end of the message (after the trailers).
class ChunkedDecoder {
 public:
  enum class State { kMore, kDone, kError };
  explicit ChunkedDecoder(size_t max_body_bytes) : max_(max_body_bytes) {}
  // Consumes bytes from `data`; returns the state and sets `*used` to the bytes consumed (on
  // kDone, the rest belongs to the next request).
  State Feed(std::string_view data, std::string* out, size_t* used);
  // Why kError: a malformed chunk (400) or a body over the limit (413).
  const Refusal& refusal() const { return refusal_; }

 private:
  enum class Step {
    kSize,
    kExt,
    kSizeLf,
    kData,
    kDataCr,
    kDataLf,
    kTrailer,
    kTrailerLf,
    kFinalLf,
    kDone
  };
  State Fail(int status, std::string why);
  Step step_ = Step::kSize;
  uint64_t size_ = 0;  // of the current chunk
  uint64_t left_ = 0;  // data bytes of the current chunk still to come
  int digits_ = 0;
  size_t line_ = 0;  // bytes of the current size or trailer line (bounded)
  size_t trailer_bytes_ = 0;
  size_t max_;
  Refusal refusal_;
};

// A reply, as the server sends it.
struct Reply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  bool close = false;  // "Connection: close", and the connection ends after it
  std::vector<std::pair<std::string, std::string>> headers;
};

// "HTTP/1.1 <status> <reason>\r\n" + the headers + "Content-Length" + "\r\n".
std::string ResponseHead(int status, std::string_view content_type, size_t content_length,
                         bool close,
                         const std::vector<std::pair<std::string, std::string>>& extra = {});
std::string_view ReasonPhrase(int status);

// {"Error": why}: the body of every refusal of the server and of the extender's verbs (bytes
// that are not UTF-8 become U+FFFD).
std::string ErrorJson(std::string_view why);

}  // namespace gpushare::net::http
