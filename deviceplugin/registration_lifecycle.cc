#include "deviceplugin/registration_lifecycle.h"

#include <algorithm>

namespace gpushare::deviceplugin {

void RegistrationLifecycle::Reset(size_t slots, int64_t first_serve_ms, const std::string& reason) {
  slots_.assign(slots, Slot{});
  for (Slot& s : slots_) {
    s.reserve_since = first_serve_ms;
    s.due_ms = first_serve_ms;
    s.reason = reason;
  }
}

void RegistrationLifecycle::Reserve(Slot& s, int64_t now, const std::string& reason,
                                    bool kubelet_started) {
  if (s.in_flight) {
    s.cancel.push_back(s.attempt);
    s.in_flight = false;
  }
  s.registered = false;
  s.events++;
  if (kubelet_started) {
    // The old streams died with the old kubelet: nothing to settle; earlier failures say
    // nothing about the new kubelet.
    s.after_kubelet_start = true;
    s.failures = 0;
    s.backoff_ms = 0;
  }
  if (!s.reserve) {
    s.reserve = true;
    s.reserve_since = now;
    s.due_ms = now + t_.debounce_ms;
    s.reason = reason;
    return;
  }
  // Already pending: a burst of events (one kubelet restart) is coalesced, up to a bound; a
  // kubelet start also ends a wait for a retry or a settle.
  const int64_t want =
      std::max(now, std::min(now + t_.debounce_ms, s.reserve_since + t_.max_debounce_ms));
  if (s.due_ms < want || kubelet_started) s.due_ms = want;
  if (kubelet_started) s.reason = reason;
}

void RegistrationLifecycle::Fail(Slot& s, int64_t now) {
  s.failures++;
  s.backoff_ms =
      s.backoff_ms == 0 ? t_.min_backoff_ms : std::min(s.backoff_ms * 2, t_.max_backoff_ms);
  s.due_ms = now + s.backoff_ms;
}

void RegistrationLifecycle::KubeletStarted(int64_t now, const std::string& reason) {
  for (Slot& s : slots_) Reserve(s, now, reason, true);
}

void RegistrationLifecycle::SocketLost(size_t slot, int64_t now) {
  Slot& s = slots_.at(slot);
  if (!s.serving || s.reserve) return;  // nothing served, or already being replaced
  Reserve(s, now, "socket_removed", false);
}

void RegistrationLifecycle::StreamEnded(size_t slot, int64_t now) {
  Slot& s = slots_.at(slot);
  if (!s.serving) return;
  Reserve(s, now, "list_and_watch_ended", false);
}

void RegistrationLifecycle::Stopped(size_t slot, bool had_open_streams, int64_t now) {
  Slot& s = slots_.at(slot);
  s.stepping = false;
  s.serving = false;
  s.registered = false;
  if (had_open_streams && !s.after_kubelet_start) s.due_ms = std::max(s.due_ms, now + t_.settle_ms);
}

void RegistrationLifecycle::Served(size_t slot, bool ok, int64_t now) {
  Slot& s = slots_.at(slot);
  s.stepping = false;
  if (!ok) {
    Fail(s, now);  // serve again after the backoff
    return;
  }
  s.serving = true;
  if (s.events != s.step_events) return;  // lost again meanwhile: the pending re-serve stands
  s.reserve = false;
  s.after_kubelet_start = false;
  s.due_ms = now;  // register at once
}

bool RegistrationLifecycle::RegisterDone(size_t slot, uint64_t attempt, bool ok, int64_t now) {
  Slot& s = slots_.at(slot);
  if (!s.in_flight || attempt != s.attempt) return false;
  s.in_flight = false;
  if (!ok) {
    Fail(s, now);  // register again after the backoff (a lost socket is an event of its own)
    return true;
  }
  s.registered = true;
  s.failures = 0;
  s.backoff_ms = 0;
  return true;
}

std::vector<LifecycleAction> RegistrationLifecycle::Poll(int64_t now) {
  std::vector<LifecycleAction> out;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    for (uint64_t a : s.cancel) out.push_back({LifecycleStep::kCancelRegister, i, a, {}});
    s.cancel.clear();
    if (s.stepping) continue;
    if (s.reserve) {
      if (now < s.due_ms) continue;
      s.stepping = true;
      s.step_events = s.events;
      out.push_back({s.serving ? LifecycleStep::kStop : LifecycleStep::kServe, i, 0, s.reason});
      continue;
    }
    if (s.serving && !s.registered && !s.in_flight && now >= s.due_ms) {
      s.in_flight = true;
      s.attempt = next_attempt_++;
      out.push_back({LifecycleStep::kRegister, i, s.attempt, s.reason});
    }
  }
  return out;
}

int64_t RegistrationLifecycle::NextWakeMs(int64_t now) const {
  int64_t next = kNever;
  for (const Slot& s : slots_) {
    if (!s.cancel.empty()) return now;
    if (s.stepping) continue;
    if (s.reserve || (s.serving && !s.registered && !s.in_flight))
      next = std::min(next, std::max(now, s.due_ms));
  }
  return next;
}

bool RegistrationLifecycle::all_registered() const {
  return std::all_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.registered; });
}

}  // namespace gpushare::deviceplugin
