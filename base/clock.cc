// See clock.h.
#include "base/clock.h"

#include <algorithm>
#include <chrono>
#include <limits>

namespace gpushare {
namespace {

using Steady = std::chrono::steady_clock;

// A notification sent between a waiter's check of the time and its wait is lost; the wait
// ends after this many real milliseconds anyway and the caller looks again.
constexpr int64_t kLostWakeupBoundMs = 10;

class Real final : public Clock {
 public:
  int64_t NowMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now().time_since_epoch())
        .count();
  }
  int64_t NowNs() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now().time_since_epoch())
        .count();
  }
  int64_t UnixNs() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  void WaitUntil(Mutex* mu, CondVar* cv, int64_t deadline_ms) override GPUSHARE_REQUIRES(mu) {
    const int64_t now = NowMs();
    if (deadline_ms <= now) return;
    // A far deadline (kNever) must not overflow the steady clock's time point.
    const int64_t wait = std::min<int64_t>(deadline_ms - now, int64_t{24} * 3600 * 1000);
    cv->WaitFor(mu, std::chrono::milliseconds(wait));
  }

  int PollTimeoutMs(int64_t deadline_ms) override {
    const int64_t wait = std::max<int64_t>(0, deadline_ms - NowMs());
    return static_cast<int>(std::min<int64_t>(wait, std::numeric_limits<int>::max()));
  }

  std::shared_ptr<void> OnAdvance(std::function<void()>) override { return nullptr; }
};

}  // namespace

std::shared_ptr<Clock> RealClock() {
  static const std::shared_ptr<Clock> clock = std::make_shared<Real>();
  return clock;
}

int64_t SimulatedClock::NowMs() {
  MutexLock lock(&mu_);
  return now_ns_ / 1'000'000;
}

int64_t SimulatedClock::NowNs() {
  MutexLock lock(&mu_);
  return now_ns_;
}

int64_t SimulatedClock::UnixNs() {
  MutexLock lock(&mu_);
  return unix_ns_;
}

void SimulatedClock::SetUnixNs(int64_t unix_ns) {
  MutexLock lock(&mu_);
  unix_ns_ = unix_ns;
}

void SimulatedClock::WaitUntil(Mutex* mu, CondVar* cv, int64_t deadline_ms) {
  if (NowMs() >= deadline_ms) return;
  std::shared_ptr<void> woken = Subscribe([cv] { cv->NotifyAll(); });
  if (NowMs() >= deadline_ms) return;
  cv->WaitFor(mu, std::chrono::milliseconds(kLostWakeupBoundMs));
}

int SimulatedClock::PollTimeoutMs(int64_t deadline_ms) {
  return NowMs() >= deadline_ms ? 0 : -1;
}

std::shared_ptr<void> SimulatedClock::OnAdvance(std::function<void()> wake) {
  return Subscribe(std::move(wake));
}

std::shared_ptr<void> SimulatedClock::Subscribe(std::function<void()> wake) {
  MutexLock lock(&mu_);
  auto it = wakers_.insert(wakers_.end(), std::move(wake));
  return std::shared_ptr<void>(static_cast<void*>(this), [this, it](void*) {
    MutexLock lock(&mu_);
    wakers_.erase(it);
  });
}

void SimulatedClock::Advance(int64_t ms) {
  AdvanceNs(std::max<int64_t>(0, ms) * 1'000'000);
}

void SimulatedClock::AdvanceNs(int64_t ns) {
  MutexLock lock(&mu_);
  now_ns_ += std::max<int64_t>(0, ns);
  unix_ns_ += std::max<int64_t>(0, ns);
  for (const auto& wake : wakers_) wake();
}

}  // namespace gpushare
