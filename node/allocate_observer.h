// ObserveAllocate: the adapter from the agent's decorators and observer (node/agent.h
// AgentObserver: the allocate counters of /metrics and the Events of refusals) to the device
// plugin server's steps and AllocateObserver (deviceplugin/allocate_observer.h). The server codes
// every refusal: its own by stage (unknown device, Unhealthy device, invalid request, device
// nodes), a step's with the step's code (memory-share units: InvalidRequest, e.g. units of two
// GPUs; the interposer's files: InterposerSetupFailed). The code goes in front of the message
// kubelet gets ("InterposerSetupFailed: ..."), so the code of kubelet's pod Event
// (UnexpectedAdmissionError) is the refusal counter's label; the observer gets the message
// without the code (the Event's reason carries it). Until the fan-out of issue 27's item 1 is
// registered in one place, the agent builds its servers' steps here.
#pragma once

#include <memory>

#include "core/resource_plan.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/server.h"
#include "node/agent.h"

namespace gpushare::node {

// Sets o->steps: `memory` (memory-share resources only, else null; its refusals coded
// InvalidRequest) then `interposer` (InterposerSetupFailed), and, with an observer,
// o->observer, which tells it every answer and every refusal with its code. `observer` may be
// null: the server codes the refusals either way.
void ObserveAllocate(std::shared_ptr<AgentObserver> observer, const PlannedResource& resource,
                     deviceplugin::AllocationDecorator memory,
                     deviceplugin::AllocationDecorator interposer,
                     deviceplugin::DevicePluginServerOptions* o);

}  // namespace gpushare::node
