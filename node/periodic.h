// PeriodicThread: a Companion (node/agent.h) that runs one step on its own thread, again at
// the time the step returns, until it is destroyed. Blocking work (an API call, kubelet's
// PodResources, a directory walk) runs here, never on the agent's lifecycle thread, whose
// re-registration promise is counted in milliseconds. What to do at each step is decided by
// the step's pure part; this only sleeps and wakes, on the clock it is given.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "base/clock.h"
#include "base/sync.h"
#include "node/agent.h"

namespace gpushare::node {

class PeriodicThread final : public Companion {
 public:
  // step(now_ms) does one round and returns when the next round is due (on `clock`); the
  // first round runs at once.
  explicit PeriodicThread(std::function<int64_t(int64_t now_ms)> step,
                          std::shared_ptr<Clock> clock = RealClock());
  ~PeriodicThread() override;  // stops, waiting for a round in progress to end

 private:
  void Loop() GPUSHARE_EXCLUDES(mu_);
  // Waits until `next` (on the clock) or the stop; returns false once stopping.
  bool WaitFor(int64_t next) GPUSHARE_EXCLUDES(mu_);

  std::function<int64_t(int64_t)> step_;
  std::shared_ptr<Clock> clock_;
  Mutex mu_;
  CondVar cv_;
  bool stop_ GPUSHARE_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last
};

}  // namespace gpushare::node
