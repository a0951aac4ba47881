// PeriodicThread: a Companion (node/agent.h) that runs one step on its own thread, again at
// the time the step returns, until it is destroyed. Blocking work (an API call, kubelet's
// PodResources, a directory walk) runs here, never on the agent's lifecycle thread, whose
// re-registration promise is counted in milliseconds. What to do at each step is decided by
// the step's pure part; this only sleeps and wakes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "node/agent.h"

namespace gpushare::node {

// Milliseconds of the steady clock (the clock steps and wake-ups are counted in).
int64_t SteadyNowMs();

class PeriodicThread final : public Companion {
 public:
  // step(now_ms) does one round and returns when the next round is due (SteadyNowMs() time);
  // the first round runs at once.
  explicit PeriodicThread(std::function<int64_t(int64_t now_ms)> step);
  ~PeriodicThread() override;  // stops, waiting for a round in progress to end

 private:
  void Loop();
  std::function<int64_t(int64_t)> step_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last
};

}  // namespace gpushare::node
