// See plugin_lifecycle.h.
#include "deviceplugin/plugin_lifecycle.h"

#include <algorithm>

namespace gpushare::deviceplugin {

bool PluginLifecycle::WatchSet() {
  if (unavailable_) return false;
  const bool was_lost = watch_retry_ms_.has_value();
  watch_retry_ms_.reset();
  return was_lost;
}

int64_t PluginLifecycle::NextWakeMs(int64_t now, std::optional<int64_t> recovery_ms) const {
  if (files_changed_) return now;
  int64_t next = std::min(next_check_ms_, registration_.NextWakeMs(now));
  if (recovery_ms) next = std::min(next, *recovery_ms);
  if (watch_retry_ms_) next = std::min(next, *watch_retry_ms_);
  return std::max(now, next);
}

}  // namespace gpushare::deviceplugin
