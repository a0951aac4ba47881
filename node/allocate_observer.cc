// See allocate_observer.h.
#include "node/allocate_observer.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/reasons.h"

namespace gpushare::node {

namespace {

deviceplugin::AllocationDecorator Tagged(std::shared_ptr<AgentObserver> obs, std::string name,
                                         deviceplugin::AllocationDecorator d,
                                         std::string_view reason) {
  if (!d) return d;
  return [obs = std::move(obs), name = std::move(name), d = std::move(d), reason](
             const deviceplugin::ResolvedRequest& q, deviceplugin::ContainerAllocation* a) {
    Status st = d(q, a);
    if (st.ok()) return st;
    if (obs) {
      std::vector<std::string> ids;
      for (const PlannedDevice* dev : q.devices) ids.push_back(dev->id);
      obs->AllocateRefused(name, reason, ids, st.message());
    }
    return Status(st.code(), reasons::Coded(reason, st.message()));
  };
}

}  // namespace

void ObserveAllocate(std::shared_ptr<AgentObserver> obs, const PlannedResource& resource,
                     deviceplugin::AllocationDecorator memory,
                     deviceplugin::AllocationDecorator interposer,
                     deviceplugin::DevicePluginServerOptions* o) {
  using deviceplugin::AllocateStage;
  if (obs) {
    o->on_allocate = [obs, name = resource.name](AllocateStage stage,
                                                 const std::vector<std::string>& ids,
                                                 const std::string& message) {
      if (stage == AllocateStage::kAnswered) return obs->Allocated(name);
      // A decorator's refusal is reported by its wrapper (Tagged), which knows which one refused.
      if (stage != AllocateStage::kDecorator)
        obs->AllocateRefused(name, deviceplugin::StageReason(stage), ids, message);
    };
  }
  auto first = Tagged(obs, resource.name, std::move(memory), reasons::kInvalidRequest);
  auto then = Tagged(obs, resource.name, std::move(interposer), reasons::kInterposerSetupFailed);
  if (!first) {
    o->decorator = std::move(then);
    return;
  }
  o->decorator = [first = std::move(first), then = std::move(then)](
                     const deviceplugin::ResolvedRequest& q,
                     deviceplugin::ContainerAllocation* a) -> Status {
    GPUSHARE_RETURN_IF_ERROR(first(q, a));
    return then ? then(q, a) : Status::Ok();
  };
}

}  // namespace gpushare::node
