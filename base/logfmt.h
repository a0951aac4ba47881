// base/logfmt.h: helpers for structured key=value log lines (logfmt style).
//
// Values that contain spaces, quotes or '=' are quoted so that every line stays machine
// readable, e.g. `event=register_failed resource=nvidia.com/gpu error="UNAVAILABLE: no kubelet"`.
#pragma once

#include <string>
#include <string_view>

namespace gpushare::logfmt {

// Returns `v` as a logfmt value: unchanged when it is a bare word, else double-quoted with
// '"' and '\' escaped and newlines written as "\n".
inline std::string Value(std::string_view v) {
  bool bare = !v.empty();
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || c == '\n' || c == '\t') bare = false;
  }
  if (bare) return std::string(v);
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

}  // namespace gpushare::logfmt
