#include "core/problem_list.h"

#include <algorithm>

#include "base/strings.h"

namespace gpushare {
namespace {

// "... and 3 more problems (23 in all)", "... and 1 more note (21 in all)"; `what` is plural.
std::string MoreLine(size_t more, size_t total, std::string what) {
  if (more == 1 && !what.empty() && what.back() == 's') what.pop_back();
  return "... and " + std::to_string(more) + " more " + what + " (" + std::to_string(total) +
         " in all)";
}

}  // namespace

std::string EscapeControlBytes(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7f) {
      out += ch;
      continue;
    }
    switch (c) {
      case 0:
        out += "\\0";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += "\\x";
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
    }
  }
  return out;
}

void ProblemList::Add(std::string_view text, uint64_t order) {
  const uint64_t seq = total_++;
  if (shown_ == 0) return;
  // Once the kept entries are trimmed and full, anything after the last one is only counted.
  if (sorted_ && kept_.size() >= shown_) {
    const Entry& last = kept_.back();
    if (order > last.order || (order == last.order && seq > last.seq)) return;
  }
  kept_.push_back({order, seq, EscapeControlBytes(text)});
  sorted_ = false;
  if (kept_.size() > 2 * shown_) Trim();
}

void ProblemList::Trim() const {
  if (sorted_) return;
  std::sort(kept_.begin(), kept_.end(), Before);
  if (kept_.size() > shown_) kept_.resize(shown_);
  sorted_ = true;
}

std::vector<std::string> ProblemList::Shown() const {
  Trim();
  std::vector<std::string> out;
  out.reserve(kept_.size());
  for (const Entry& e : kept_) out.push_back(e.text);
  return out;
}

std::string ProblemList::Joined() const {
  std::vector<std::string> lines = Shown();
  if (total_ > lines.size()) lines.push_back(MoreLine(total_ - lines.size(), total_, "problems"));
  return JoinLines(lines);
}

std::vector<std::string> CapLines(std::vector<std::string> lines, const std::string& what,
                                  size_t shown) {
  if (lines.size() <= shown) return lines;
  const size_t total = lines.size();
  lines.resize(shown);
  lines.push_back(MoreLine(total - shown, total, what));
  return lines;
}

}  // namespace gpushare
