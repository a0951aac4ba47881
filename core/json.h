// A small strict JSON reader for every annotation gpushare writes and reads (memory shares, the
// GPU inventory, gpushare.io/allocations): core/ may not use a JSON library, and one reader
// keeps them alike. The adapters read Kubernetes' own objects with nlohmann. It accepts RFC 8259
// JSON, refuses nesting deeper than kMaxDepth and texts beyond kMaxBytes, and keeps integers exact.
// Errors name what is wrong and its offset ("unexpected end of input at offset 12"). Pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpushare::json {

inline constexpr int kMaxDepth = 16;
inline constexpr size_t kMaxBytes = 1 << 20;  // annotations are at most 256 KiB in total anyway

struct Value {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool b = false;
  bool is_int = false;  // a number without fraction or exponent that fits int64
  int64_t i = 0;
  std::string s;  // string value, or a number's spelling
  std::vector<Value> items;
  struct Member;  // a pair of an incomplete type is rejected by clang with libstdc++; a struct is
                  // not
  std::vector<Member> members;  // in document order

  // The first member named `key`, or null.
  const Value* Find(std::string_view key) const;
};

struct Value::Member {
  std::string first;
  Value second;
};

// One whole JSON text (whitespace around the value allowed, nothing after it).
Result<Value> Parse(std::string_view text);

// "null", "a boolean", "a number", "a string", "an array", "an object": for error messages.
std::string_view TypeName(Value::Type t);

// A JSON string literal with the escapes RFC 8259 requires; bytes that are not well-formed
// UTF-8 become U+FFFD, one per byte.
std::string Quote(std::string_view s);

// A scalar as written (a string quoted), or the type's name: for error messages.
std::string Spelling(const Value& v);

}  // namespace gpushare::json
