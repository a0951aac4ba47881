// See memshare_timing.h.
#include "core/memshare_timing.h"

#include <algorithm>

namespace gpushare::memshare {
namespace {

int64_t Double(int64_t backoff, int64_t first, int64_t max) {
  return std::min(std::max(backoff * 2, first), max);
}

}  // namespace

void WorkerSchedule::PlanChanged(int64_t now) {
  publish_due_ = true;
  publish_backoff_ms_ = 0;
  reconcile_at_ = now;
}

bool WorkerSchedule::NodeDiffers() {
  const bool was_due = publish_due_;
  publish_due_ = true;
  return !was_due;
}

WorkerStep WorkerSchedule::Next(int64_t now) {
  if (publish_due_ && now >= publish_retry_at_) {
    publish_due_ = false;
    return WorkerStep::kPublish;
  }
  if (now < reconcile_at_) return WorkerStep::kWait;
  reconcile_at_ = now + t_.reconcile_interval_ms;
  return WorkerStep::kReconcile;
}

int64_t WorkerSchedule::NextWakeMs() const {
  return publish_due_ ? std::min(reconcile_at_, publish_retry_at_) : reconcile_at_;
}

void WorkerSchedule::Published(bool ok, int64_t now) {
  if (ok) {
    publish_backoff_ms_ = 0;
    return;
  }
  publish_backoff_ms_ = Double(publish_backoff_ms_, 500, 30000);
  publish_retry_at_ = now + publish_backoff_ms_;
  publish_due_ = true;
}

bool WorkerSchedule::MayList(int64_t now) {
  if (last_list_ && now < *last_list_ + t_.min_list_interval_ms) {
    Rearm(*last_list_ + t_.min_list_interval_ms);
    return false;
  }
  last_list_ = now;
  return true;
}

void WorkerSchedule::ListFailed(bool rate_limited, int64_t now) {
  list_backoff_ms_ =
      rate_limited ? Double(list_backoff_ms_, 100, 2000) : Double(list_backoff_ms_, 500, 30000);
  Rearm(now + list_backoff_ms_);
}

void WorkerSchedule::Reconciled(bool retry_soon, int64_t now) {
  list_backoff_ms_ = 0;
  Rearm(now + (retry_soon ? t_.retry_soon_ms : t_.reconcile_interval_ms));
}

void WorkerSchedule::Rearm(int64_t at) {
  reconcile_at_ = std::min(reconcile_at_, at);
}

}  // namespace gpushare::memshare
