#include "core/lines.h"

namespace gpushare {

std::string JoinLines(const std::vector<std::string>& lines) {
  std::string s;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) s += '\n';
    s += lines[i];
  }
  return s;
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

}  // namespace gpushare
