// base/logging.h: how every gpushare daemon logs: logfmt lines (`ts=... level=... event=...`) on
// stderr through spdlog's "gpushare" logger, flushed at every line (a daemon's log must not sit
// in a buffer when it is killed).
#pragma once

#include <string_view>

namespace gpushare {

// The levels --log-level accepts, for messages.
inline constexpr std::string_view kLogLevels = "trace, debug, info, warn, error or off";

// Makes the "gpushare" logger the default at `level`; false (and nothing changed) when `level`
// is not one of kLogLevels.
bool ConfigureLogging(std::string_view level);

}  // namespace gpushare
