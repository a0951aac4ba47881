// sm_limiter.h: the compute-share controller behind CUDA_DEVICE_SM_LIMIT.
//
// What is limited: the fraction of wall-clock time the container's kernels keep the GPU busy,
// the quantity NVML reports as SM utilisation. A limit of p% lets the container consume p ms of
// GPU time per 100 ms of wall time, on average, across all its processes.
//
// How: launches (kernels, cooperative kernels, graph launches) pass a shared GCRA ("virtual
// scheduling") gate. The gate keeps one 64-bit theoretical arrival time (TAT) per device in the
// shared region; admitting a launch whose GPU cost is c ns advances TAT by c * 100 / p, and a
// launch is held back while TAT is more than `tolerance` ahead of now. Costs are *measured*, not
// guessed from grid sizes: each limited launch is bracketed by two CUDA events, and when they
// complete the difference between the measured GPU time and the estimate that was charged is
// applied to TAT. The estimate is a per-kernel (per CUfunction / CUgraphExec) moving average.
// Because every nanosecond of measured GPU time is eventually charged, the long-run utilisation
// converges to p regardless of SM count, grid size or kernel length (HAMi-core's token bucket
// scaled its step with SM^2 and drifted on large GPUs, HAMi-core#274/#314); because the gate
// refills continuously there is no bang-bang oscillation; a workload that stays below p never
// waits. At most kMaxInflight measured launches are outstanding per process, and a kernel
// whose cost is still unknown runs alone, so estimate errors are bounded.
//
// Limits of the method (documented in docs/interposer.md): it is statistical, not a hard
// partition (MIG or MPS give hard ones); concurrent kernels on several streams are charged their
// full elapsed time each (the container is throttled a little more than needed); time-slicing
// with other tenants inflates measured durations the same way.
//
// The controller is pure: time and events are supplied by the caller. The library feeds it
// CLOCK_MONOTONIC and CUDA events; tests/interpose/sm_limiter_sim_test.cc feeds it a simulated
// GPU on a virtual clock.
#pragma once

#include <stdint.h>

#include "interpose/region_layout.h"

namespace gpushare::interpose {

// SmBucket (the shared per-device gate state) is part of the region's layout: region_layout.h.

struct SmGateParams {
  uint32_t limit_pct = 100;           // 1..99 limits
  int64_t tolerance_ns = 20'000'000;  // burst: how far TAT may run ahead of now (wall ns)
};

// Tries to admit a launch with estimated GPU cost `cost_ns` at `now_ns`. Returns 0 when admitted
// (the cost is charged) or the number of ns to wait before trying again.
int64_t SmGateAdmit(SmBucket* bucket, const SmGateParams& params, int64_t now_ns, int64_t cost_ns);
// Applies a measurement: `delta_ns` = measured GPU time - charged estimate (may be negative).
void SmGateCorrect(SmBucket* bucket, const SmGateParams& params, int64_t delta_ns);

// Per-process cost estimates, keyed by kernel or graph, and the ring of measured launches.
class SmCostTracker {
 public:
  static constexpr int kMaxInflight = 64;
  static constexpr int kTableSize = 512;  // power of two

  // The cost to charge for a launch of `key`; *known is false when neither this key nor any
  // other kernel has been measured yet.
  int64_t Estimate(uint64_t key, bool* known) const;

  // Ring of launches waiting for their measurement, oldest first.
  int inflight() const { return count_; }
  bool full() const { return count_ == kMaxInflight; }
  // Records a launch; returns the ring position (0..kMaxInflight-1) whose events the caller
  // uses for it. Precondition: !full().
  int Push(uint64_t key, int64_t charged_ns, bool known);
  // Position of the oldest launch, -1 when empty.
  int OldestPosition() const { return count_ == 0 ? -1 : head_; }
  bool OldestKnown() const { return count_ == 0 || ring_[head_].known; }
  // The oldest launch completed after `measured_ns` of GPU time: updates the estimate and
  // returns measured - charged (to pass to SmGateCorrect).
  int64_t CompleteOldest(int64_t measured_ns);
  // The oldest launch cannot be measured (event failure): drops it and returns what it was
  // charged (to refund with SmGateCorrect(-charged)).
  int64_t DropOldest();
  void Reset() { *this = SmCostTracker(); }

 private:
  struct Entry {
    uint64_t key;
    int64_t charged_ns;
    bool known;
  };
  struct Cost {
    uint64_t key;
    int64_t ewma_ns;
  };
  void Learn(uint64_t key, int64_t measured_ns);

  Entry ring_[kMaxInflight] = {};
  int head_ = 0;
  int count_ = 0;
  Cost table_[kTableSize] = {};
  int64_t global_ewma_ns_ = 0;
  bool any_measured_ = false;
};

}  // namespace gpushare::interpose
