#include "kube/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace gpushare::kube {

TokenBucket::TokenBucket(double qps, int burst, std::shared_ptr<Clock> clock)
    : qps_(qps),
      burst_(std::max(1, burst)),
      clock_(clock ? std::move(clock) : RealClock()),
      tokens_(burst_),
      last_(Now()) {}

std::chrono::steady_clock::time_point TokenBucket::Now() const {
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(clock_->NowNs()));
}

void TokenBucket::RefillLocked(std::chrono::steady_clock::time_point now) {
  if (now <= last_) return;
  double elapsed = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
  last_ = now;
}

std::chrono::nanoseconds TokenBucket::Reserve() {
  if (unlimited()) return std::chrono::nanoseconds(0);
  MutexLock lock(&mu_);
  RefillLocked(Now());
  tokens_ -= 1.0;
  if (tokens_ >= 0) return std::chrono::nanoseconds(0);
  double wait_s = -tokens_ / qps_;
  return std::chrono::nanoseconds(static_cast<int64_t>(std::ceil(wait_s * 1e9)));
}

bool TokenBucket::TryAcquire() {
  if (unlimited()) return true;
  MutexLock lock(&mu_);
  RefillLocked(Now());
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

Backoff::Backoff(BackoffOptions options, uint64_t seed) : options_(options), rng_(seed) {}

std::chrono::milliseconds Backoff::Next() {
  double base = static_cast<double>(options_.initial.count()) *
                std::pow(std::max(1.0, options_.factor), attempt_);
  base = std::min(base, static_cast<double>(options_.max.count()));
  if (attempt_ < 1000) ++attempt_;
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  double d = base * (1.0 + std::max(0.0, options_.jitter) * u);
  return std::chrono::milliseconds(static_cast<int64_t>(d));
}

}  // namespace gpushare::kube
