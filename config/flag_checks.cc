#include "config/flag_checks.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>

#include "config/duration.h"
#include "core/problem_list.h"

namespace gpushare {
namespace {

template <typename T>
std::optional<T> Parse(const std::string& s) {
  T v{};
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (b != e && *b == '+') ++b;
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e || b == e) return std::nullopt;
  return v;
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string Got(const std::string& s) {
  return ", got " + EscapeControlBytes(s);
}

}  // namespace

CLI::Validator IntegerIn(int64_t min, int64_t max, std::string note) {
  const std::string allowed = "must be " + std::to_string(min) + ".." + std::to_string(max) +
                              (note.empty() ? "" : " (" + note + ")");
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        auto v = Parse<int64_t>(s);
        return v && *v >= min && *v <= max ? "" : allowed + Got(s);
      },
      std::to_string(min) + ".." + std::to_string(max));
}

CLI::Validator NumberIn(double min, double max, std::string note) {
  const std::string allowed =
      "must be " + Number(min) + ".." + Number(max) + (note.empty() ? "" : " (" + note + ")");
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        auto v = Parse<double>(s);
        return v && std::isfinite(*v) && *v >= min && *v <= max ? "" : allowed + Got(s);
      },
      Number(min) + ".." + Number(max));
}

CLI::Validator DurationIn(int64_t min_ms, std::string min_text, int64_t max_ms,
                          std::string max_text) {
  const std::string allowed =
      "must be a positive duration from " + min_text + " to " + max_text + ", like 10s";
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        auto ms = ParseDurationMs(s);
        return ms && *ms >= min_ms && *ms <= max_ms ? "" : allowed + Got(s);
      },
      min_text + ".." + max_text);
}

}  // namespace gpushare
