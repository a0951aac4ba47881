// base/strings.h: the string helpers every layer uses. Problem lists travel as one Status
// message with one problem per line; JoinLines and SplitLines build and take apart such a
// message. Pure: no I/O.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpushare {

// The lines joined by '\n' (no trailing newline).
std::string JoinLines(const std::vector<std::string>& lines);

// The non-empty lines of `text`.
std::vector<std::string> SplitLines(std::string_view text);

// The items joined by `separator` ("a, b, c" with the default).
std::string Join(const std::vector<std::string>& items, std::string_view separator = ", ");

// The first `limit` items joined by `separator`, then ", ... (N in all)" when there were more.
std::string JoinLimited(const std::vector<std::string>& items, size_t limit,
                        std::string_view separator = ", ");

// `dir` + "/" + `name`, without a doubled '/' when `dir` ends with one.
std::string JoinPath(std::string_view dir, std::string_view name);

// True when `s` is one or more ASCII digits.
bool IsDigits(std::string_view s);

// `s` for one line of text: control bytes (a hostile message's newlines, escapes) become spaces,
// and beyond `max` bytes it is cut, with "..." after.
std::string OneLine(std::string_view s, size_t max = 400);

}  // namespace gpushare
