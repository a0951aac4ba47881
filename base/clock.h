// Clock: the one way gpushare's daemons read the time and wait for it, passed in by whoever builds
// the part that needs it (core/ takes the time as an argument and reads no clock).
//
// The loops (node/agent.cc, node/memshare_service.cc, node/periodic.h) decide with pure state
// machines that take the time in milliseconds and return the next wake-up; they read the time
// and wait through this interface only. Rate limits read it in nanoseconds (NowNs), timestamps
// written to the API and certificate ages in wall time (UnixNs). RealClock() is the steady and
// the system clock. SimulatedClock is the tests' clock: its time moves only when the test
// advances it, and advancing it wakes every waiter, so a backoff of 5 s costs a test nothing
// and happens exactly when the test says.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>

#include "base/sync.h"

namespace gpushare {

class Clock {
 public:
  virtual ~Clock() = default;

  // Milliseconds on a monotonic time line (only differences mean anything).
  virtual int64_t NowMs() = 0;
  // The same line in nanoseconds.
  virtual int64_t NowNs() = 0;
  // Wall time: nanoseconds since the Unix epoch (may jump; never use it to time a wait).
  virtual int64_t UnixNs() = 0;

  // With `mu` held: waits on `cv` until it is notified or NowMs() >= deadline_ms, releasing
  // `mu` meanwhile. May also return early (callers re-check their condition in a loop).
  virtual void WaitUntil(Mutex* mu, CondVar* cv, int64_t deadline_ms) GPUSHARE_REQUIRES(mu) = 0;

  // For a wait that poll()s file descriptors: the real milliseconds to block for `deadline_ms`
  // (0: due now; -1: until a descriptor is ready, OnAdvance's callback included).
  virtual int PollTimeoutMs(int64_t deadline_ms) = 0;

  // Calls `wake` (from the thread that moves the time, without locks of the caller's) whenever
  // time moves by other means than passing; until the returned handle is destroyed. The real
  // clock never calls it and returns an empty handle.
  virtual std::shared_ptr<void> OnAdvance(std::function<void()> wake) = 0;
};

// The steady clock and the system clock (shared, stateless).
std::shared_ptr<Clock> RealClock();

// Time that moves only by Advance. Thread-safe.
class SimulatedClock final : public Clock {
 public:
  static constexpr int64_t kDefaultUnixNs = 1'796'212'800'000'000'000;  // 2026-12-02T12:00:00Z
  explicit SimulatedClock(int64_t start_ms = 1'000'000, int64_t start_unix_ns = kDefaultUnixNs)
      : now_ns_(start_ms * 1'000'000), unix_ns_(start_unix_ns) {}

  int64_t NowMs() override;
  int64_t NowNs() override;
  int64_t UnixNs() override;
  void WaitUntil(Mutex* mu, CondVar* cv, int64_t deadline_ms) override GPUSHARE_REQUIRES(mu);
  int PollTimeoutMs(int64_t deadline_ms) override;
  std::shared_ptr<void> OnAdvance(std::function<void()> wake) override;

  // Moves the time (monotonic and wall) by `ms` (>= 0) and wakes every waiter and OnAdvance
  // callback.
  void Advance(int64_t ms);
  // The same by `ns` (>= 0).
  void AdvanceNs(int64_t ns);
  // Sets the wall time only (a clock set back or forward); the monotonic time does not move.
  void SetUnixNs(int64_t unix_ns);

 private:
  using Wakers = std::list<std::function<void()>>;
  std::shared_ptr<void> Subscribe(std::function<void()> wake);

  Mutex mu_;
  int64_t now_ns_ GPUSHARE_GUARDED_BY(mu_);
  int64_t unix_ns_ GPUSHARE_GUARDED_BY(mu_);
  Wakers wakers_ GPUSHARE_GUARDED_BY(mu_);
};

}  // namespace gpushare
