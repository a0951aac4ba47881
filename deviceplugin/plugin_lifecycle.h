// PluginLifecycle: everything the node agent's loop waits for, as one pure state machine
// (etcd-io/raft's RawNode is the model): events and the current time in, the steps due now and
// the next wake-up out. No I/O, no threads, no clock; node/agent.cc carries out the steps and
// sleeps until NextWakeMs or an event (a signal, inotify, a posted outcome).
//
// It holds:
//   - the registrations (RegistrationLifecycle: serve, register, kubelet restart, backoff,
//     debounce, settle), reached through registration();
//   - the inotify watch of the plugin directory (and of kubelet.sock's directory): it is how
//     the agent learns that kubelet restarted (kubelet.sock created) or that a socket of ours
//     went, at once; while it cannot be set (the directory is gone) it is retried every
//     kWatchRetryMs, and a watch set again after a loss counts as a kubelet start (kubelet
//     recreates the directory). Where inotify is not available at all (WatchUnavailable: no
//     inotify instance could be made) nothing is retried and the check below is the only way;
//   - the check of the sockets by state (our sockets gone or replaced, kubelet.sock replaced):
//     at once after the watch reported a change in the directory (FilesChanged), else every
//     kSafetyCheckMs while the watch is set (in case an event is lost: slow, the events keep
//     the promises) and every kPollCheckMs while it is not (then the check is what finds a
//     kubelet restart, within the 2 s promise);
//   - the health tracker's next quiet-period recovery, which the caller passes in.
#pragma once

#include <cstdint>
#include <optional>

#include "deviceplugin/registration_lifecycle.h"

namespace gpushare::deviceplugin {

class PluginLifecycle {
 public:
  static constexpr int64_t kSafetyCheckMs = 10000;  // fallback check while the watch is set
  static constexpr int64_t kPollCheckMs = 1000;     // ...while it is not
  static constexpr int64_t kWatchRetryMs = 500;

  explicit PluginLifecycle(LifecycleTiming timing = {}) : registration_(timing) {}

  RegistrationLifecycle& registration() { return registration_; }
  const RegistrationLifecycle& registration() const { return registration_; }

  // The watches could not be set, or a watched directory went away: retry at now + kWatchRetryMs.
  void WatchLost(int64_t now) {
    if (!unavailable_) watch_retry_ms_ = now + kWatchRetryMs;
    files_changed_ = true;  // whatever happened to the directory, look at once
  }
  // The watches are set. Returns true when they had been lost (the caller then reports a kubelet
  // start: kubelet recreates the directory when it starts).
  bool WatchSet();
  // Whether the retry of the watches is due at `now`.
  bool WatchRetryDue(int64_t now) const { return watch_retry_ms_ && now >= *watch_retry_ms_; }
  // Inotify cannot be used at all (no instance; a file system without it): the fallback check
  // runs every kPollCheckMs from now on, and no watch is retried.
  void WatchUnavailable() {
    unavailable_ = true;
    watch_retry_ms_.reset();
    files_changed_ = true;
  }
  bool watching() const { return !unavailable_ && !watch_retry_ms_; }
  // How often the loop checks the files by state: kSafetyCheckMs or kPollCheckMs (above).
  int64_t CheckIntervalMs() const { return watching() ? kSafetyCheckMs : kPollCheckMs; }

  // The watch reported a change in the directory: the files are checked at the next pass.
  void FilesChanged() { files_changed_ = true; }
  // Whether the files are to be checked at `now`; then the caller checks and reports Checked.
  bool CheckDue(int64_t now) const { return files_changed_ || now >= next_check_ms_; }
  void Checked(int64_t now) {
    files_changed_ = false;
    next_check_ms_ = now + CheckIntervalMs();
  }

  // When the loop must pass next: the earliest of the registrations' next step, the watch
  // retry, `recovery_ms` (the health tracker's next recovery) and the next check of the files.
  int64_t NextWakeMs(int64_t now, std::optional<int64_t> recovery_ms) const;

 private:
  RegistrationLifecycle registration_;
  std::optional<int64_t> watch_retry_ms_;  // set while the watches are to be retried
  bool unavailable_ = false;               // no inotify: the fallback check only
  bool files_changed_ = false;             // the watch reported a change not checked yet
  int64_t next_check_ms_ = 0;              // the next check of the files by state
};

}  // namespace gpushare::deviceplugin
