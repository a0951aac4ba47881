// See periodic.h.
#include "node/periodic.h"

namespace gpushare::node {

PeriodicThread::PeriodicThread(std::function<int64_t(int64_t now_ms)> step,
                               std::shared_ptr<Clock> clock)
    : step_(std::move(step)), clock_(std::move(clock)), thread_([this] { Loop(); }) {}

PeriodicThread::~PeriodicThread() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

void PeriodicThread::Loop() {
  while (WaitFor(step_(clock_->NowMs()))) {
  }
}

bool PeriodicThread::WaitFor(int64_t next) {
  MutexLock lock(&mu_);
  while (!stop_ && clock_->NowMs() < next) clock_->WaitUntil(&mu_, &cv_, next);
  return !stop_;
}

}  // namespace gpushare::node
