// Range checks for numeric command-line flags, as CLI11 validators with one wording for every
// flag of every binary: CLI11 puts the flag's name in front, the check says what is allowed and
// what was given, and the main exits 2, e.g.
//   --jobs: must be 0..1024 (0: one per CPU), got -3
// The text is checked before CLI11 converts it, so "two", "1e99", "nan" or a value past the
// type's range get the same message instead of a conversion error (or a silent wrap-around).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace gpushare {

// A decimal integer in [min, max]; `note` (optional) explains special values: "0: one per CPU".
CLI::Validator IntegerIn(int64_t min, int64_t max, std::string note = "");

// A finite decimal number in [min, max] (not nan or inf).
CLI::Validator NumberIn(double min, double max, std::string note = "");

// A duration as config/duration.h reads it ("10s", "1m30s"), from min_ms (> 0) to max_ms; the
// bounds are given as they are written in the message: DurationIn(100, "100ms", 86400000, "24h").
CLI::Validator DurationIn(int64_t min_ms, std::string min_text, int64_t max_ms,
                          std::string max_text);

}  // namespace gpushare
