// ObserveAllocate: reports every Allocate outcome of a device plugin server to the agent's
// observer (node/agent.h AgentObserver: the allocate counters of /metrics and the Events of
// refusals), each refusal with its core/reasons.h code: the server's own refusals by stage
// (unknown device, Unhealthy device, invalid request, device nodes), the decorators' by which
// decorator refused (memory-share units: InvalidRequest, e.g. units of two GPUs; the interposer's
// files: InterposerSetupFailed).
//
// The decorators' refusals also go back to kubelet with that code in front of the message
// ("InterposerSetupFailed: ..."), as deviceplugin/server.cc does for its own refusals, so the
// code of kubelet's pod Event (UnexpectedAdmissionError) is the refusal counter's label. The
// observer reports the message without the code (the Event's reason carries it).
#pragma once

#include <memory>

#include "core/resource_plan.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/server.h"
#include "node/agent.h"

namespace gpushare::node {

// Sets o->decorator: `memory` (memory-share resources only, else null) then `interposer`, each
// wrapped to code (and, with an observer, report) its refusal; and, with an observer,
// o->on_allocate. `observer` may be null: the refusals are still coded.
void ObserveAllocate(std::shared_ptr<AgentObserver> observer, const PlannedResource& resource,
                     deviceplugin::AllocationDecorator memory,
                     deviceplugin::AllocationDecorator interposer,
                     deviceplugin::DevicePluginServerOptions* o);

}  // namespace gpushare::node
