// ObserveAllocate: reports every Allocate outcome of a device plugin server to the agent's
// observer (node/agent.h AgentObserver: the allocate counters of /metrics and the Events of
// refusals), each refusal with its core/reasons.h code: the server's own refusals by stage
// (unknown device, Unhealthy device, invalid request, device nodes), the decorators' by which
// decorator refused (memory-share units: InvalidRequest, e.g. units of two GPUs; the interposer's
// files: InterposerSetupFailed).
#pragma once

#include <memory>

#include "core/resource_plan.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/server.h"
#include "node/agent.h"

namespace gpushare::node {

// Sets o->on_allocate and o->decorator: `memory` (memory-share resources only, else null) then
// `interposer`, each wrapped to report its refusal.
void ObserveAllocate(std::shared_ptr<AgentObserver> observer, const PlannedResource& resource,
                     deviceplugin::AllocationDecorator memory,
                     deviceplugin::AllocationDecorator interposer,
                     deviceplugin::DevicePluginServerOptions* o);

}  // namespace gpushare::node
