// See periodic.h.
#include "node/periodic.h"

#include <chrono>

namespace gpushare::node {

int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

PeriodicThread::PeriodicThread(std::function<int64_t(int64_t now_ms)> step)
    : step_(std::move(step)), thread_([this] { Loop(); }) {}

PeriodicThread::~PeriodicThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void PeriodicThread::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    const int64_t next = step_(SteadyNowMs());
    lock.lock();
    const int64_t wait = next - SteadyNowMs();
    if (wait > 0) cv_.wait_for(lock, std::chrono::milliseconds(wait), [this] { return stop_; });
  }
}

}  // namespace gpushare::node
