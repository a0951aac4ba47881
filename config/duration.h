// Durations written the way Go (and so NVIDIA's config) writes them: "300ms", "5m", "1h30m",
// "1.5h", "0". Used for gpushare.health.recoverAfter and accepted for flags.gfd.sleepInterval.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpushare {

// Milliseconds, or nullopt when `s` is not a non-negative Go duration (units ns, us, µs, ms,
// s, m, h; a bare "0" is allowed). Sub-millisecond remainders are rounded up.
std::optional<int64_t> ParseDurationMs(std::string_view s);

}  // namespace gpushare
