#include "config/duration.h"

namespace gpushare {

std::optional<int64_t> ParseDurationMs(std::string_view s) {
  if (s.empty()) return std::nullopt;
  if (s == "0") return 0;
  constexpr __int128 kMax = static_cast<__int128>(INT64_MAX);
  __int128 total_ns = 0;
  while (!s.empty()) {
    __int128 whole = 0, frac = 0, frac_scale = 1;
    bool digits = false, dot = false;
    size_t n = 0;
    for (; n < s.size(); ++n) {
      char c = s[n];
      if (c == '.' && !dot) {
        dot = true;
      } else if (c >= '0' && c <= '9') {
        digits = true;
        if (!dot) {
          whole = whole * 10 + (c - '0');
          if (whole > kMax) return std::nullopt;
        } else if (frac_scale < 1'000'000'000'000'000LL) {
          frac = frac * 10 + (c - '0');
          frac_scale *= 10;
        }
      } else {
        break;
      }
    }
    if (!digits) return std::nullopt;
    s.remove_prefix(n);
    int64_t unit = 0;
    auto take = [&s](std::string_view u) {
      if (s.substr(0, u.size()) != u) return false;
      s.remove_prefix(u.size());
      return true;
    };
    if (take("ns"))
      unit = 1;
    else if (take("us") || take("\xC2\xB5s"))
      unit = 1'000;
    else if (take("ms"))
      unit = 1'000'000;
    else if (take("s"))
      unit = 1'000'000'000;
    else if (take("m"))
      unit = 60'000'000'000LL;
    else if (take("h"))
      unit = 3'600'000'000'000LL;
    else
      return std::nullopt;
    total_ns += whole * unit + (frac * unit + frac_scale - 1) / frac_scale;
    if (total_ns > kMax) return std::nullopt;
  }
  return static_cast<int64_t>((total_ns + 999'999) / 1'000'000);
}

}  // namespace gpushare
