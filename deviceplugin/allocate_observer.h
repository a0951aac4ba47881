// AllocateObserver: how every container request of every Allocate ended, told to whoever
// follows Allocate (gpushare-node's counters, the Events of refusals), through one interface and
// one fan-out; and AllocationStep: what runs after the strategy's answer (memory-share units,
// the in-container library), each step's refusals coded with its own core/reasons.h code by the
// server (docs/architecture.md, "Where the code is going", item 1).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "deviceplugin/allocation.h"

namespace gpushare::deviceplugin {

// One container request of one Allocate.
struct AllocateOutcome {
  std::string_view resource;
  std::span<const std::string> device_ids;  // as kubelet sent them
  std::string_view reason;                  // "" = answered, else the refusal's reasons.h code
  std::string_view message;                 // the refusal without its code ("" when answered)
  bool answered() const { return reason.empty(); }
};

class AllocateObserver {
 public:
  virtual ~AllocateObserver() = default;
  // Called on a gRPC thread, exactly once per container request; must not block.
  virtual void OnAllocate(const AllocateOutcome& outcome) = 0;
};

// Tells every observer, in the order given; fixed once built.
class AllocateFanOut final : public AllocateObserver {
 public:
  explicit AllocateFanOut(std::vector<std::shared_ptr<AllocateObserver>> observers)
      : observers_(std::move(observers)) {}
  void OnAllocate(const AllocateOutcome& outcome) override {
    for (const std::shared_ptr<AllocateObserver>& o : observers_) o->OnAllocate(outcome);
  }

 private:
  std::vector<std::shared_ptr<AllocateObserver>> observers_;
};

// A step after the strategy's answer: adds to the answer, or refuses the container. The server
// sends a refusal to kubelet as "<refusal_reason>: <message>" and tells the observer that code.
struct AllocationStep {
  std::string_view refusal_reason;  // a core/reasons.h code
  AllocationDecorator apply;
};

}  // namespace gpushare::deviceplugin
