// Fuzzes the extender's HTTP/1.1 request reader: the head parser and the chunked body decoder,
// as the server feeds them from the socket. Beyond "no crash", it checks what the server relies
// on: a parsed head never claims more bytes than it was given, the decoder never consumes more
// than it was fed nor returns more body than its limit, and feeding the body in one piece or one
// byte at a time ends the same way (TCP may split a request anywhere).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "net/http_wire.h"

namespace http = gpushare::net::http;

namespace {

struct Decoded {
  http::ChunkedDecoder::State state = http::ChunkedDecoder::State::kMore;
  std::string body;
  size_t used = 0;  // bytes of the input taken up to the end of the message
  int status = 0;
};

Decoded Decode(std::string_view data, size_t piece, size_t max_body) {
  http::ChunkedDecoder d(max_body);
  Decoded out;
  while (out.used < data.size()) {
    std::string_view chunk = data.substr(out.used, piece);
    size_t used = 0;
    out.state = d.Feed(chunk, &out.body, &used);
    if (used > chunk.size()) __builtin_trap();
    out.used += used;
    if (out.state == http::ChunkedDecoder::State::kError) {
      out.status = d.refusal().status;
      break;
    }
    if (out.state == http::ChunkedDecoder::State::kDone) break;
    if (used != chunk.size()) __builtin_trap();  // kMore takes everything it was given
  }
  if (out.body.size() > max_body) __builtin_trap();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  http::Limits limits;
  limits.max_head_bytes = 4096;
  limits.max_headers = 32;
  limits.max_body_bytes = 4096;
  const http::HeadResult r = http::ParseRequestHead(input, limits);
  if (r.kind == http::HeadResult::Kind::kRefused) {
    if (r.refusal.status < 400 || r.refusal.status > 599 || r.refusal.reason.empty())
      __builtin_trap();
    return 0;
  }
  if (r.kind != http::HeadResult::Kind::kDone) return 0;
  if (r.consumed == 0 || r.consumed > input.size()) __builtin_trap();
  if (r.head.headers.size() > limits.max_headers) __builtin_trap();
  const std::string_view rest = input.substr(r.consumed);
  if (!r.head.chunked) {
    (void)r.head.Header("content-type");
    return 0;
  }
  const Decoded whole = Decode(rest, rest.size() + 1, limits.max_body_bytes);
  const Decoded bytewise = Decode(rest, 1, limits.max_body_bytes);
  if (whole.state != bytewise.state || whole.status != bytewise.status) __builtin_trap();
  if (whole.state == http::ChunkedDecoder::State::kDone &&
      (whole.body != bytewise.body || whole.used != bytewise.used))
    __builtin_trap();
  return 0;
}
