#include "net/http_wire.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

namespace gpushare::net::http {
namespace {

bool IsTchar(unsigned char c) {
  // RFC 9110 §5.6.2: token characters.
  if (std::isalnum(c)) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return IsTchar(static_cast<unsigned char>(c)); });
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The comma-separated elements of a list header, trimmed, empty ones dropped (RFC 9110 §5.6.1).
std::vector<std::string_view> ListElements(std::string_view v) {
  std::vector<std::string_view> out;
  while (!v.empty()) {
    const size_t comma = v.find(',');
    const std::string_view e = Trim(v.substr(0, comma));
    if (!e.empty()) out.push_back(e);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return out;
}

// A printable value: no control characters but HTAB (obs-text bytes are allowed).
bool IsFieldValue(std::string_view v) {
  for (char ch : v) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  }
  return true;
}

HeadResult Refuse(int status, std::string why) {
  HeadResult r;
  r.kind = HeadResult::Kind::kRefused;
  r.refusal = {status, std::move(why), true};
  return r;
}

// Splits `buf` into lines ending in LF (a CR before the LF is dropped). Returns false at the
// end of the buffer without a LF.
bool NextLine(std::string_view buf, size_t* pos, std::string_view* line) {
  const size_t nl = buf.find('\n', *pos);
  if (nl == std::string_view::npos) return false;
  size_t end = nl;
  if (end > *pos && buf[end - 1] == '\r') --end;
  *line = buf.substr(*pos, end - *pos);
  *pos = nl + 1;
  return true;
}

}  // namespace

std::optional<std::string_view> RequestHead::Header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return std::string_view(v);
  return std::nullopt;
}

HeadResult ParseRequestHead(std::string_view buf, const Limits& limits) {
  size_t pos = 0;
  // Blank lines before the request line (a client's stray CRLF after a body) are skipped.
  while (pos < buf.size() && (buf[pos] == '\r' || buf[pos] == '\n') && pos < limits.max_head_bytes)
    ++pos;
  std::vector<std::string_view> lines;
  std::string_view line;
  bool complete = false;
  while (NextLine(buf, &pos, &line)) {
    if (pos > limits.max_head_bytes) break;
    if (line.empty()) {
      complete = true;
      break;
    }
    if (lines.size() > limits.max_headers)
      return Refuse(431, "more than " + std::to_string(limits.max_headers) + " header fields");
    lines.push_back(line);
  }
  if (!complete) {
    if (pos > limits.max_head_bytes || buf.size() > limits.max_head_bytes)
      return Refuse(431, "request line and headers larger than " +
                             std::to_string(limits.max_head_bytes) + " bytes");
    return {};
  }

  HeadResult r;
  r.kind = HeadResult::Kind::kDone;
  r.consumed = pos;
  RequestHead& h = r.head;
  // request-line = method SP request-target SP HTTP-version
  const std::string_view request_line = lines.front();
  const size_t sp1 = request_line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : request_line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || request_line.find(' ', sp2 + 1) != std::string_view::npos)
    return Refuse(400, "malformed request line (want METHOD SP TARGET SP HTTP/1.x)");
  const std::string_view method = request_line.substr(0, sp1);
  std::string_view target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = request_line.substr(sp2 + 1);
  if (!IsToken(method)) return Refuse(400, "malformed request line: bad method");
  if (target.empty() || !IsFieldValue(target) ||
      target.find_first_of(" \t") != std::string_view::npos)
    return Refuse(400, "malformed request line: bad target");
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" ||
      !std::isdigit(static_cast<unsigned char>(version[5])) || version[6] != '.' ||
      !std::isdigit(static_cast<unsigned char>(version[7])))
    return Refuse(400, "malformed request line: bad HTTP version");
  if (version[5] != '1')
    return Refuse(
        505, "HTTP version " + std::string(version.substr(5)) + " not supported (HTTP/1.x only)");
  h.method = std::string(method);
  h.target = std::string(target);
  h.minor_version = version[7] - '0';
  // absolute-form (RFC 9112 §3.2.2): the path is what follows the authority.
  if (target.front() != '/' && target != "*") {
    const size_t scheme = target.find("://");
    if (scheme == std::string_view::npos || !IsToken(target.substr(0, scheme)))
      return Refuse(400, "malformed request target (want /path or http://host/path)");
    const size_t slash = target.find('/', scheme + 3);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  h.path = std::string(target.substr(0, target.find('?')));

  // header-field = field-name ":" OWS field-value OWS
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view l = lines[i];
    if (l.front() == ' ' || l.front() == '\t')
      return Refuse(400, "obsolete line folding in the headers");
    const size_t colon = l.find(':');
    if (colon == std::string_view::npos) return Refuse(400, "malformed header line (no colon)");
    const std::string_view name = l.substr(0, colon);
    if (!IsToken(name))
      return Refuse(400, "malformed header name \"" + std::string(name.substr(0, 64)) + "\"");
    const std::string_view value = Trim(l.substr(colon + 1));
    if (!IsFieldValue(value))
      return Refuse(400, "control character in header " + std::string(name));
    h.headers.emplace_back(Lower(name), std::string(value));
  }

  const bool http11 = h.minor_version >= 1;
  if (http11 && !h.Header("host")) return Refuse(400, "HTTP/1.1 request without a Host header");
  bool have_length = false, have_te = false;
  h.keep_alive = http11;
  for (const auto& [k, v] : h.headers) {
    if (k == "content-length") {
      // 1*DIGIT, possibly repeated (a list or several fields) with the same value.
      for (std::string_view e : ListElements(v)) {
        if (e.empty() ||
            !std::all_of(e.begin(), e.end(), [](char c) { return c >= '0' && c <= '9'; }))
          return Refuse(400, "malformed Content-Length \"" + std::string(v.substr(0, 64)) + "\"");
        uint64_t n = 0;
        for (char c : e)
          n = n > (UINT64_MAX - 9) / 10 ? UINT64_MAX : n * 10 + static_cast<uint64_t>(c - '0');
        if (have_length && n != h.content_length)
          return Refuse(400, "conflicting Content-Length values");
        h.content_length = n;
        have_length = true;
      }
      if (!have_length) return Refuse(400, "empty Content-Length");
    } else if (k == "transfer-encoding") {
      for (std::string_view e : ListElements(v)) {
        if (Lower(e) != "chunked" || h.chunked)
          return Refuse(501, "Transfer-Encoding \"" + std::string(v.substr(0, 64)) +
                                 "\" not supported (only chunked)");
        h.chunked = true;
      }
      have_te = true;
    } else if (k == "connection") {
      for (std::string_view e : ListElements(v))
        if (!http11 && Lower(e) == "keep-alive") h.keep_alive = true;
    } else if (k == "expect") {
      if (Lower(v) != "100-continue")
        return Refuse(417, "Expect \"" + std::string(v.substr(0, 64)) + "\" not supported");
      h.expect_continue = http11;
    }
  }
  for (const auto& [k, v] : h.headers)  // "close" wins, wherever it is
    if (k == "connection")
      for (std::string_view e : ListElements(v))
        if (Lower(e) == "close") h.keep_alive = false;
  if (have_te && !h.chunked) return Refuse(400, "empty Transfer-Encoding");
  if (have_te && !http11) return Refuse(400, "Transfer-Encoding in an HTTP/1.0 request");
  // Both framings: a request smuggling attempt or a broken proxy; neither can be trusted.
  if (have_te && have_length) return Refuse(400, "both Transfer-Encoding and Content-Length");
  return r;
}

ChunkedDecoder::State ChunkedDecoder::Fail(int status, std::string why) {
  refusal_ = {status, std::move(why), true};
  return State::kError;
}

ChunkedDecoder::State ChunkedDecoder::Feed(std::string_view data, std::string* out, size_t* used) {
  constexpr size_t kMaxLine = 4096;       // a chunk-size line with its extensions
  constexpr size_t kMaxTrailers = 16384;  // all trailer lines together
  size_t i = 0;
  auto done = [&](State s) {
    *used = i;
    return s;
  };
  while (i < data.size()) {
    const char c = data[i];
    switch (step_) {
      case Step::kSize: {
        int v = -1;
        if (c >= '0' && c <= '9') v = c - '0';
        if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
        if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
        if (v >= 0) {
          if (++digits_ > 15) return done(Fail(413, "chunk size too large"));
          size_ = size_ * 16 + static_cast<uint64_t>(v);
          ++i;
          break;
        }
        if (digits_ == 0) return done(Fail(400, "malformed chunked body: chunk size expected"));
        if (c == ';' || c == ' ' || c == '\t') {
          step_ = Step::kExt;
        } else if (c == '\r') {
          step_ = Step::kSizeLf;
          ++i;
        } else if (c == '\n') {
          step_ = Step::kSizeLf;  // a bare LF ends the line too
        } else {
          return done(Fail(400, "malformed chunked body: bad character after the chunk size"));
        }
        break;
      }
      case Step::kExt:
        if (c == '\r') {
          step_ = Step::kSizeLf;
          ++i;
          break;
        }
        if (c == '\n') {
          step_ = Step::kSizeLf;
          break;
        }
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
          return done(Fail(400, "malformed chunked body: control character in a chunk extension"));
        if (++line_ > kMaxLine)
          return done(Fail(400, "malformed chunked body: chunk extension too long"));
        ++i;
        break;
      case Step::kSizeLf:
        if (c != '\n')
          return done(Fail(400, "malformed chunked body: CRLF expected after the chunk size"));
        ++i;
        line_ = 0;
        digits_ = 0;
        if (size_ == 0) {
          step_ = Step::kTrailer;
          break;
        }
        if (size_ > max_ || out->size() + size_ > max_)
          return done(Fail(413, "request body larger than " + std::to_string(max_) + " bytes"));
        left_ = size_;
        size_ = 0;
        step_ = Step::kData;
        break;
      case Step::kData: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(left_, data.size() - i));
        out->append(data.data() + i, n);
        i += n;
        left_ -= n;
        if (left_ == 0) step_ = Step::kDataCr;
        break;
      }
      case Step::kDataCr:
        if (c == '\r') {
          step_ = Step::kDataLf;
          ++i;
        } else if (c == '\n') {
          step_ = Step::kSize;
          ++i;
        } else {
          return done(Fail(400, "malformed chunked body: CRLF expected after chunk data"));
        }
        break;
      case Step::kDataLf:
        if (c != '\n')
          return done(Fail(400, "malformed chunked body: CRLF expected after chunk data"));
        step_ = Step::kSize;
        ++i;
        break;
      case Step::kTrailer:  // at the start of a trailer line, or of the final empty line
        if (c == '\r') {
          step_ = Step::kFinalLf;
          ++i;
        } else if (c == '\n') {
          ++i;
          step_ = Step::kDone;
          return done(State::kDone);
        } else {
          step_ = Step::kTrailerLf;
        }
        break;
      case Step::kTrailerLf:  // inside a trailer line (ignored)
        if (++trailer_bytes_ > kMaxTrailers)
          return done(Fail(431, "chunked trailers larger than 16384 bytes"));
        ++i;
        if (c == '\n') step_ = Step::kTrailer;
        break;
      case Step::kFinalLf:
        if (c != '\n') return done(Fail(400, "malformed chunked body: CRLF expected at the end"));
        ++i;
        step_ = Step::kDone;
        return done(State::kDone);
      case Step::kDone:
        return done(State::kDone);
    }
  }
  return done(step_ == Step::kDone ? State::kDone : State::kMore);
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Status";
  }
}

std::string ResponseHead(int status, std::string_view content_type, size_t content_length,
                         bool close,
                         const std::vector<std::pair<std::string, std::string>>& extra) {
  std::string out;
  out.reserve(160);
  out += "HTTP/1.1 ";
  out += std::to_string(status);
  out += ' ';
  out += ReasonPhrase(status);
  out += "\r\nContent-Type: ";
  out += content_type;
  out += "\r\nContent-Length: ";
  out += std::to_string(content_length);
  out += "\r\n";
  if (close) out += "Connection: close\r\n";
  for (const auto& [k, v] : extra) {
    out += k;
    out += ": ";
    out += v;
    out += "\r\n";
  }
  out += "\r\n";
  return out;
}

std::string ErrorJson(std::string_view why) {
  return nlohmann::json{{"Error", why}}.dump(-1, ' ', false,
                                             nlohmann::json::error_handler_t::replace);
}

}  // namespace gpushare::net::http
