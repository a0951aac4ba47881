// See json.h.
#include "core/json.h"

#include <charconv>
#include <utility>

namespace gpushare::json {
namespace {

class Reader {
 public:
  explicit Reader(std::string_view text) : t_(text) {}

  Result<Value> ParseDocument() {
    if (t_.size() > kMaxBytes)
      return Status::InvalidArgument("JSON value of " + std::to_string(t_.size()) +
                                     " bytes, at most " + std::to_string(kMaxBytes) + " accepted");
    Value v;
    if (!ParseValue(&v, 0)) return Status::InvalidArgument(error_);
    Ws();
    if (p_ != t_.size())
      return Status::InvalidArgument(Where("unexpected data after the JSON value"));
    return v;
  }

 private:
  std::string Where(std::string_view what) const {
    return std::string(what) + " at offset " + std::to_string(p_);
  }
  bool Fail(std::string_view what) {
    if (error_.empty()) error_ = Where(what);
    return false;
  }
  void Ws() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n' || t_[p_] == '\r'))
      ++p_;
  }
  bool Literal(std::string_view word) {
    if (t_.substr(p_, word.size()) != word) return Fail("invalid literal");
    p_ += word.size();
    return true;
  }

  bool ParseValue(Value* out, int depth) {
    Ws();
    if (p_ >= t_.size()) return Fail("unexpected end of input");
    const char c = t_[p_];
    switch (c) {
      case '{':
        return Object(out, depth + 1);
      case '[':
        return Array(out, depth + 1);
      case '"':
        out->type = Value::Type::kString;
        return String(&out->s);
      case 't':
        out->type = Value::Type::kBool;
        out->b = true;
        return Literal("true");
      case 'f':
        out->type = Value::Type::kBool;
        out->b = false;
        return Literal("false");
      case 'n':
        out->type = Value::Type::kNull;
        return Literal("null");
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return Number(out);
        return Fail(std::string("unexpected character '") + c + "'");
    }
  }

  bool Object(Value* out, int depth) {
    if (depth > kMaxDepth) return Fail("nesting deeper than " + std::to_string(kMaxDepth));
    out->type = Value::Type::kObject;
    ++p_;
    Ws();
    if (p_ < t_.size() && t_[p_] == '}') {
      ++p_;
      return true;
    }
    for (;;) {
      Ws();
      if (p_ >= t_.size() || t_[p_] != '"') return Fail("expected a string key");
      std::string key;
      if (!String(&key)) return false;
      Ws();
      if (p_ >= t_.size() || t_[p_] != ':') return Fail("expected ':'");
      ++p_;
      Value v;
      if (!ParseValue(&v, depth)) return false;
      for (const auto& m : out->members)
        if (m.first == key) return Fail("duplicate key \"" + key + "\"");
      out->members.push_back({std::move(key), std::move(v)});
      Ws();
      if (p_ < t_.size() && t_[p_] == ',') {
        ++p_;
        continue;
      }
      if (p_ < t_.size() && t_[p_] == '}') {
        ++p_;
        return true;
      }
      return Fail("expected ',' or '}'");
    }
  }

  bool Array(Value* out, int depth) {
    if (depth > kMaxDepth) return Fail("nesting deeper than " + std::to_string(kMaxDepth));
    out->type = Value::Type::kArray;
    ++p_;
    Ws();
    if (p_ < t_.size() && t_[p_] == ']') {
      ++p_;
      return true;
    }
    for (;;) {
      Value v;
      if (!ParseValue(&v, depth)) return false;
      out->items.push_back(std::move(v));
      Ws();
      if (p_ < t_.size() && t_[p_] == ',') {
        ++p_;
        continue;
      }
      if (p_ < t_.size() && t_[p_] == ']') {
        ++p_;
        return true;
      }
      return Fail("expected ',' or ']'");
    }
  }

  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  bool Hex4(uint32_t* out) {
    if (p_ + 4 > t_.size()) return Fail("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const int h = Hex(t_[p_ + k]);
      if (h < 0) return Fail("invalid \\u escape");
      v = v * 16 + static_cast<uint32_t>(h);
    }
    p_ += 4;
    *out = v;
    return true;
  }
  static void Utf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  bool String(std::string* out) {
    ++p_;  // opening quote
    for (;;) {
      if (p_ >= t_.size()) return Fail("unterminated string");
      const char c = t_[p_];
      if (c == '"') {
        ++p_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return Fail("control character in string");
      if (c != '\\') {
        *out += c;
        ++p_;
        continue;
      }
      ++p_;
      if (p_ >= t_.size()) return Fail("unterminated escape");
      const char e = t_[p_++];
      switch (e) {
        case '"':
          *out += '"';
          break;
        case '\\':
          *out += '\\';
          break;
        case '/':
          *out += '/';
          break;
        case 'b':
          *out += '\b';
          break;
        case 'f':
          *out += '\f';
          break;
        case 'n':
          *out += '\n';
          break;
        case 'r':
          *out += '\r';
          break;
        case 't':
          *out += '\t';
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo = 0;
            if (t_.substr(p_, 2) != "\\u") return Fail("unpaired surrogate");
            p_ += 2;
            if (!Hex4(&lo)) return false;
            if (lo < 0xDC00 || lo > 0xDFFF) return Fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return Fail("unpaired surrogate");
          }
          Utf8(cp, out);
          break;
        }
        default:
          return Fail("invalid escape");
      }
    }
  }

  bool Number(Value* out) {
    const size_t start = p_;
    if (t_[p_] == '-') ++p_;
    if (p_ >= t_.size()) return Fail("truncated number");
    if (t_[p_] == '0') {
      ++p_;
    } else if (t_[p_] >= '1' && t_[p_] <= '9') {
      while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') ++p_;
    } else {
      return Fail("invalid number");
    }
    bool integral = true;
    if (p_ < t_.size() && t_[p_] == '.') {
      integral = false;
      ++p_;
      if (p_ >= t_.size() || t_[p_] < '0' || t_[p_] > '9') return Fail("invalid number");
      while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') ++p_;
    }
    if (p_ < t_.size() && (t_[p_] == 'e' || t_[p_] == 'E')) {
      integral = false;
      ++p_;
      if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-')) ++p_;
      if (p_ >= t_.size() || t_[p_] < '0' || t_[p_] > '9') return Fail("invalid number");
      while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') ++p_;
    }
    out->type = Value::Type::kNumber;
    out->s = std::string(t_.substr(start, p_ - start));
    if (integral) {
      int64_t v = 0;
      auto [ptr, ec] = std::from_chars(out->s.data(), out->s.data() + out->s.size(), v);
      if (ec == std::errc() && ptr == out->s.data() + out->s.size()) {
        out->is_int = true;
        out->i = v;
      }
    }
    return true;
  }

  std::string_view t_;
  size_t p_ = 0;
  std::string error_;
};

}  // namespace

const Value* Value::Find(std::string_view key) const {
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

std::string_view TypeName(Value::Type t) {
  switch (t) {
    case Value::Type::kNull:
      return "null";
    case Value::Type::kBool:
      return "a boolean";
    case Value::Type::kNumber:
      return "a number";
    case Value::Type::kString:
      return "a string";
    case Value::Type::kArray:
      return "an array";
    case Value::Type::kObject:
      return "an object";
  }
  return "?";
}

namespace {

// The length of the well-formed UTF-8 sequence at the start of `s` (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF), or 0.
size_t Utf8Length(std::string_view s) {
  const auto b = [&s](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < n || b(1) < lo || b(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i)
    if (b(i) < 0x80 || b(i) > 0xBF) return 0;
  return n;
}

}  // namespace

// JSON string literal with the escapes RFC 8259 requires; a byte that is not part of
// well-formed UTF-8 becomes U+FFFD (JSON text is UTF-8, and the API server refuses other bytes).
std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      static const char* hex = "0123456789abcdef";
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else if (u < 0x80) {
      out += c;
    } else if (const size_t n = Utf8Length(s.substr(i)); n > 0) {
      out.append(s, i, n);
      i += n - 1;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
    }
  }
  return out + "\"";
}

std::string Spelling(const Value& v) {
  switch (v.type) {
    case Value::Type::kString:
      return Quote(v.s);
    case Value::Type::kNumber:
      return v.s;
    case Value::Type::kBool:
      return v.b ? "true" : "false";
    case Value::Type::kNull:
      return "null";
    default:
      return std::string(TypeName(v.type));
  }
}

Result<Value> Parse(std::string_view text) {
  return Reader(text).ParseDocument();
}

}  // namespace gpushare::json
