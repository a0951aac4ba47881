// ProblemList: the problems found in one input, with a bound on what is kept and shown.
//
// Validation stays total (every problem is found and counted), but a hostile or badly broken
// input must not turn into a message of unbounded size: 1,000 overlapping sharing entries once
// gave 499,500 lines and took the node agent past its memory limit on a reload. A ProblemList
// keeps the first `shown` problems in input order (by an order key, e.g. line and column in
// the file; problems with the same key keep the order they were added in) and counts the rest:
//   sharing.timeSlicing.resources[1].devices: overlaps ...
//   ...
//   ... and 979 more problems (999 in all)
// Memory is O(shown) whatever the number of problems. Every text is stored with its control
// bytes escaped (EscapeControlBytes), so a NUL or a newline inside a key can neither cut a line
// short when it is printed nor split one problem into two lines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpushare {

// `s` with every C0 control byte and DEL written as an escape: \0, \t, \n, \r, or \xNN
// (e.g. "mig\0Strategy", "a\x1b[31m"). Other bytes, UTF-8 included, are kept as they are.
std::string EscapeControlBytes(std::string_view s);

class ProblemList {
 public:
  static constexpr size_t kDefaultShown = 20;
  // Problems added without an order key come after every problem with one.
  static constexpr uint64_t kUnordered = UINT64_MAX;

  explicit ProblemList(size_t shown = kDefaultShown) : shown_(shown) {}

  // Records a problem. Lower `order` is shown first.
  void Add(std::string_view text, uint64_t order = kUnordered);
  void push_back(std::string_view text) { Add(text); }

  bool empty() const { return total_ == 0; }
  // Every problem added, shown or not.
  size_t size() const { return total_; }

  // The problems shown, in order, without the count line.
  std::vector<std::string> Shown() const;
  // Shown() joined by '\n', then "... and K more problems (N in all)" when some were left out.
  std::string Joined() const;

 private:
  struct Entry {
    uint64_t order;
    uint64_t seq;
    std::string text;
  };
  static bool Before(const Entry& a, const Entry& b) {
    return a.order != b.order ? a.order < b.order : a.seq < b.seq;
  }
  // Keeps the first shown_ entries of kept_, sorted.
  void Trim() const;

  size_t shown_;
  size_t total_ = 0;
  mutable std::vector<Entry> kept_;  // at most 2 * shown_ (+1) entries, sorted after Trim()
  mutable bool sorted_ = true;
};

// At most `shown` lines of `lines`, then "... and K more <what> (N in all)" when some were left
// out (`what`: "notes", "problems").
std::vector<std::string> CapLines(std::vector<std::string> lines, const std::string& what,
                                  size_t shown = ProblemList::kDefaultShown);

}  // namespace gpushare
