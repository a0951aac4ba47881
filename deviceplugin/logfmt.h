// logfmt: helpers for structured key=value log lines (logfmt style).
//
// Values that contain spaces, quotes or '=' are quoted so that every line stays machine
// readable, e.g. `event=register_failed resource=nvidia.com/gpu error="UNAVAILABLE: no kubelet"`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

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

// The non-empty lines of a multi-line message (e.g. one config problem per line), so that
// each can be logged or printed on its own.
inline std::vector<std::string> Lines(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    std::string_view line = text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    if (!line.empty()) out.emplace_back(line);
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  return out;
}

}  // namespace gpushare::logfmt
