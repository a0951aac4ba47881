// Lines: problem lists travel as one Status message with one problem per line. These two
// helpers join such a list and split it again (for printing one line each, and in tests).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpushare {

// The lines joined by '\n' (no trailing newline).
std::string JoinLines(const std::vector<std::string>& lines);

// The non-empty lines of `text`.
std::vector<std::string> SplitLines(std::string_view text);

}  // namespace gpushare
