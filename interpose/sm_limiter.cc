// See sm_limiter.h.
#include "interpose/sm_limiter.h"

#include "interpose/base.h"

namespace gpushare::interpose {
namespace {

// Wall-clock budget a GPU cost consumes at this limit: cost * 100 / pct, saturating.
int64_t WallCost(int64_t cost_ns, uint32_t pct) {
  if (pct == 0 || pct >= 100) return cost_ns;
  if (cost_ns <= 0) return cost_ns < 0 ? -WallCost(-cost_ns, pct) : 0;
  const int64_t kMax = int64_t{1} << 62;
  if (cost_ns > kMax / 100) return kMax / static_cast<int64_t>(pct);
  return cost_ns * 100 / static_cast<int64_t>(pct);
}

uint64_t Mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}

}  // namespace

int64_t SmGateAdmit(SmBucket* b, const SmGateParams& p, int64_t now_ns, int64_t cost_ns) {
  if (cost_ns < 0) cost_ns = 0;
  int64_t wall = WallCost(cost_ns, p.limit_pct);
  int64_t tat = LoadAcquire(&b->tat_ns);
  for (;;) {
    int64_t base = tat > now_ns ? tat : now_ns;
    if (base - now_ns > p.tolerance_ns) {
      FetchAdd(&b->delayed, uint64_t{1});
      return base - now_ns - p.tolerance_ns;
    }
    int64_t next = base + wall;
    if (CasStrong(&b->tat_ns, &tat, next)) {
      FetchAdd(&b->admitted, uint64_t{1});
      return 0;
    }
  }
}

void SmGateCorrect(SmBucket* b, const SmGateParams& p, int64_t delta_ns) {
  if (delta_ns == 0) return;
  FetchAdd(&b->tat_ns, WallCost(delta_ns, p.limit_pct));
}

int64_t SmCostTracker::Estimate(uint64_t key, bool* known) const {
  uint64_t h = Mix(key) & (kTableSize - 1);
  for (int i = 0; i < 8; ++i) {
    const Cost& c = table_[(h + static_cast<uint64_t>(i)) & (kTableSize - 1)];
    if (c.key == key && key != 0) {
      *known = true;
      return c.ewma_ns;
    }
    if (c.key == 0) break;
  }
  *known = any_measured_;
  return global_ewma_ns_;
}

int SmCostTracker::Push(uint64_t key, int64_t charged_ns, bool known) {
  int pos = (head_ + count_) % kMaxInflight;
  ring_[pos] = Entry{key, charged_ns, known};
  ++count_;
  return pos;
}

void SmCostTracker::Learn(uint64_t key, int64_t measured_ns) {
  // Exponentially weighted moving average, weight 1/4 for the newest sample.
  global_ewma_ns_ =
      any_measured_ ? global_ewma_ns_ + (measured_ns - global_ewma_ns_) / 4 : measured_ns;
  any_measured_ = true;
  if (key == 0) return;
  uint64_t h = Mix(key) & (kTableSize - 1);
  for (int i = 0; i < 8; ++i) {
    Cost& c = table_[(h + static_cast<uint64_t>(i)) & (kTableSize - 1)];
    if (c.key == key) {
      c.ewma_ns += (measured_ns - c.ewma_ns) / 4;
      return;
    }
    if (c.key == 0) {
      c.key = key;
      c.ewma_ns = measured_ns;
      return;
    }
  }
  // Neighbourhood full: overwrite the home slot (estimates are only hints).
  table_[h] = Cost{key, measured_ns};
}

int64_t SmCostTracker::CompleteOldest(int64_t measured_ns) {
  if (count_ == 0) return 0;
  if (measured_ns < 0) measured_ns = 0;
  Entry e = ring_[head_];
  head_ = (head_ + 1) % kMaxInflight;
  --count_;
  Learn(e.key, measured_ns);
  return measured_ns - e.charged_ns;
}

int64_t SmCostTracker::DropOldest() {
  if (count_ == 0) return 0;
  int64_t charged = ring_[head_].charged_ns;
  head_ = (head_ + 1) % kMaxInflight;
  --count_;
  return charged;
}

}  // namespace gpushare::interpose
