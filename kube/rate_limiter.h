// Client-side flow control: a token-bucket rate limiter for requests and a jittered exponential
// backoff for retries.
//
// TokenBucket is the limiter client-go puts in front of every request (QPS with a burst): the
// bucket holds up to `burst` tokens and refills at `qps` per second; each request takes one,
// waiting for it when the bucket is empty. Reservations are handed out in order, so a caller
// that reserves while the bucket is empty is told exactly how long to wait. The clock is
// injectable so tests can count tokens instead of measuring time.
//
// Backoff produces the delays between retries: initial * factor^n, capped at `max`, plus a
// random jitter of up to `jitter` times the delay (so many clients retrying at once spread
// out), as client-go's reflector does. Deterministic for a given seed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>

#include "base/clock.h"
#include "base/sync.h"

namespace gpushare::kube {

class TokenBucket {
 public:
  // qps <= 0 disables limiting. burst < 1 is treated as 1. Time is `clock`'s NowNs.
  TokenBucket(double qps, int burst, std::shared_ptr<Clock> clock = RealClock());

  // Takes a token and returns how long the caller has to wait before using it (zero when one
  // was available). Thread-safe.
  std::chrono::nanoseconds Reserve();

  // Takes a token only if one is available now.
  bool TryAcquire();

  bool unlimited() const { return qps_ <= 0; }

 private:
  std::chrono::steady_clock::time_point Now() const;
  void RefillLocked(std::chrono::steady_clock::time_point now) GPUSHARE_REQUIRES(mu_);

  double qps_;
  double burst_;
  std::shared_ptr<Clock> clock_;
  Mutex mu_;
  double tokens_ GPUSHARE_GUARDED_BY(mu_);  // may go negative: outstanding reservations
  std::chrono::steady_clock::time_point last_ GPUSHARE_GUARDED_BY(mu_);
};

struct BackoffOptions {
  std::chrono::milliseconds initial{800};
  std::chrono::milliseconds max{30000};
  double factor = 2.0;
  double jitter = 0.5;  // each delay is multiplied by 1 + jitter * U[0,1)
};

class Backoff {
 public:
  explicit Backoff(BackoffOptions options = {}, uint64_t seed = 0);

  // The delay before the next attempt; each call grows the base delay by `factor`.
  std::chrono::milliseconds Next();
  // Back to `initial` (after a success).
  void Reset() { attempt_ = 0; }
  int attempts() const { return attempt_; }

 private:
  BackoffOptions options_;
  int attempt_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace gpushare::kube
