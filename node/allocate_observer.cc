// See allocate_observer.h.
#include "node/allocate_observer.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/reasons.h"

namespace gpushare::node {

namespace {

// The agent's view of Allocate: every container request counted, every refusal reported with
// its code (the server's reasons: its own stages' and each step's).
class AgentAllocateObserver final : public deviceplugin::AllocateObserver {
 public:
  AgentAllocateObserver(std::shared_ptr<AgentObserver> observer, std::string resource)
      : observer_(std::move(observer)), resource_(std::move(resource)) {}
  void OnAllocate(const deviceplugin::AllocateOutcome& outcome) override {
    if (outcome.answered()) return observer_->Allocated(resource_);
    observer_->AllocateRefused(
        resource_, outcome.reason,
        std::vector<std::string>(outcome.device_ids.begin(), outcome.device_ids.end()),
        std::string(outcome.message));
  }

 private:
  std::shared_ptr<AgentObserver> observer_;
  std::string resource_;
};

}  // namespace

void ObserveAllocate(std::shared_ptr<AgentObserver> obs, const PlannedResource& resource,
                     deviceplugin::AllocationDecorator memory,
                     deviceplugin::AllocationDecorator interposer,
                     deviceplugin::DevicePluginServerOptions* o) {
  o->steps.clear();
  if (memory) o->steps.push_back({reasons::kInvalidRequest, std::move(memory)});
  if (interposer) o->steps.push_back({reasons::kInterposerSetupFailed, std::move(interposer)});
  o->observer =
      obs ? std::make_shared<AgentAllocateObserver>(std::move(obs), resource.name) : nullptr;
}

}  // namespace gpushare::node
