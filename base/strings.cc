#include "base/strings.h"

namespace gpushare {

std::string JoinLines(const std::vector<std::string>& lines) {
  return Join(lines, "\n");
}

std::vector<std::string> SplitLines(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    if (nl > start) out.emplace_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

std::string Join(const std::vector<std::string>& items, std::string_view separator) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) s += separator;
    s += items[i];
  }
  return s;
}

std::string JoinLimited(const std::vector<std::string>& items, size_t limit,
                        std::string_view separator) {
  if (items.size() <= limit) return Join(items, separator);
  std::vector<std::string> head(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(limit));
  return Join(head, separator) + ", ... (" + std::to_string(items.size()) + " in all)";
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string s(dir);
  if (!s.empty() && s.back() != '/') s += '/';
  s += name;
  return s;
}

bool IsDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::string OneLine(std::string_view s, size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) out += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
  if (s.size() > max) out += "...";
  return out;
}

}  // namespace gpushare
