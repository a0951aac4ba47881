// Timestamps in the Kubernetes API: RFC 3339 strings in UTC with second precision
// ("2026-12-02T10:04:05Z"; the API server also accepts fractional seconds and offsets, which
// ParseTimestamp reads). Used for creationTimestamp, deletionTimestamp, event times and
// condition transition times.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpushare::kube {

// "YYYY-MM-DDTHH:MM:SSZ" (seconds precision, as metav1.Time serialises).
std::string FormatTimestamp(std::chrono::system_clock::time_point t);

// Parses RFC 3339 ("...Z", "...+02:00", optional fractional seconds).
Result<std::chrono::system_clock::time_point> ParseTimestamp(std::string_view s);

}  // namespace gpushare::kube
