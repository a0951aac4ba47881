// GPU choices for time-slices, MIG devices and whole GPUs: which devices gpushare-node's
// GetPreferredAllocation may advise when the pods waiting for them name GPU models or devices
// (core/gpu_selector.h, HAMi's nvidia.com/use-gputype and friends).
//
// Kubelet's GetPreferredAllocation names no pod: it says which resource, how many devices, and
// which are free. The node knows the pods bound to it that ask that resource in that number
// and hold none of it yet (the "asks"); one of them is the pod kubelet admits. RestrictChoice
// says which of the free devices the advice may come from:
//   1. no ask names GPUs: all of them (the allocation policy alone decides);
//   2. enough free devices (with must_include) sit on GPUs every ask allows: only those, so the
//      advice is right whichever ask it is for (when every ask names the same GPUs, that is
//      simply their choice);
//   3. else the first ask, in the order kubelet admits pods (creation time, then namespace/name),
//      whose allowed devices suffice: its own (for a pod that names no GPUs, the devices no
//      other ask allows when there are enough of them, so it does not take what they need);
//   4. else (no ask can be satisfied from what is free): all of them, and the verdict says
//      which GPUs each choice excluded, so the node can log why the advice could not follow.
// Kubelet takes the advice whenever it names allocation_size free devices, so in cases 1 to 3
// the container gets GPUs its pod allows.
//
// Pure: no I/O. The caller maps each device to its GPU (model and UUID).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/gpu_selector.h"

namespace gpushare::choice {

// One pod on the node that asks the resource in the size of the request and holds none yet.
struct PendingAsk {
  std::string pod;       // "namespace/name"
  std::string created;   // metadata.creationTimestamp (RFC 3339 sorts as text)
  GpuSelector selector;  // empty: any GPU
};

// The GPU a device lives on: its model (NVML's product name) and UUID.
struct DeviceGpu {
  int index = -1;
  std::string model;
  std::string uuid;
};

enum class ChoiceRule {
  kNone,           // 1: no ask names GPUs
  kCommon,         // 2: devices every ask allows
  kFirstAsk,       // 3: the first ask that can be satisfied
  kUnsatisfiable,  // 4: none can
};
std::string_view ChoiceRuleName(ChoiceRule r);  // "none", "common", "first-ask", "unsatisfiable"

struct ChoiceVerdict {
  ChoiceRule rule = ChoiceRule::kNone;
  std::vector<std::string> available;  // what the advice may come from (must_include kept)
  // kFirstAsk: whose choice was followed; kCommon: the pods that name GPUs, in admission order
  // ("ns/a,ns/b", at most 8 named, then ",...").
  std::string pod;
  // kUnsatisfiable (and kFirstAsk, for the asks passed over): "ns/a: GPU 1: <why>; GPU 2: ..."
  std::vector<std::string> excluded;
};

// `gpu_of` maps a device ID to its GPU (nullopt-like: index -1 for an ID the resource does not
// know, which every choice then excludes). Asks are taken in admission order whatever order
// they come in.
ChoiceVerdict RestrictChoice(const std::vector<std::string>& available,
                             const std::vector<std::string>& must_include, int size,
                             const std::function<DeviceGpu(const std::string& id)>& gpu_of,
                             std::vector<PendingAsk> asks);

}  // namespace gpushare::choice
