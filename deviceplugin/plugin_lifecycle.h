// PluginLifecycle: everything the node agent's loop waits for, as one pure state machine
// (etcd-io/raft's RawNode is the model): events and the current time in, the steps due now and
// the next wake-up out. No I/O, no threads, no clock; node/agent.cc carries out the steps and
// sleeps until NextWakeMs or an event (a signal, inotify, a posted outcome).
//
// It holds:
//   - the registrations (RegistrationLifecycle: serve, register, kubelet restart, backoff,
//     debounce, settle), reached through registration();
//   - the inotify watch of the plugin directory (and of kubelet.sock's directory): while it
//     cannot be set (the directory is gone) it is retried every kWatchRetryMs, and a watch set
//     again after a loss counts as a kubelet start (kubelet recreates the directory);
//   - the fallback check of the sockets: the loop looks at its sockets and kubelet.sock on
//     every pass, and passes at least every kCheckIntervalMs, in case an inotify event is lost;
//   - the health tracker's next quiet-period recovery, which the caller passes in.
#pragma once

#include <cstdint>
#include <optional>

#include "deviceplugin/registration_lifecycle.h"

namespace gpushare::deviceplugin {

class PluginLifecycle {
 public:
  static constexpr int64_t kCheckIntervalMs = 500;
  static constexpr int64_t kWatchRetryMs = 500;

  explicit PluginLifecycle(LifecycleTiming timing = {}) : registration_(timing) {}

  RegistrationLifecycle& registration() { return registration_; }
  const RegistrationLifecycle& registration() const { return registration_; }

  // The watches could not be set, or a watched directory went away: retry at now + kWatchRetryMs.
  void WatchLost(int64_t now) { watch_retry_ms_ = now + kWatchRetryMs; }
  // The watches are set. Returns true when they had been lost (the caller then reports a kubelet
  // start: kubelet recreates the directory when it starts).
  bool WatchSet();
  // Whether the retry of the watches is due at `now`.
  bool WatchRetryDue(int64_t now) const { return watch_retry_ms_ && now >= *watch_retry_ms_; }
  bool watching() const { return !watch_retry_ms_; }

  // When the loop must pass next: the earliest of the registrations' next step, the watch
  // retry, `recovery_ms` (the health tracker's next recovery) and now + kCheckIntervalMs.
  int64_t NextWakeMs(int64_t now, std::optional<int64_t> recovery_ms) const;

 private:
  RegistrationLifecycle registration_;
  std::optional<int64_t> watch_retry_ms_;  // set while the watches are to be retried
};

}  // namespace gpushare::deviceplugin
