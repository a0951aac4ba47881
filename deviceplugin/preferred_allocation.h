// PreferredAllocator: the advice GetPreferredAllocation gives kubelet.
//
// Kubelet asks, for one container, which `allocation_size` devices to take out of
// `available` (healthy and not in use, plus `must_include`), and must take `must_include`.
// The advice never names a device outside `available` and answers exactly allocation_size
// devices whenever `available` has that many:
//   - replicas and MIG devices: `distributed` takes, one device at a time, a replica of the
//     underlying device (then the physical GPU) with the fewest replicas already in use, so
//     containers spread over GPUs; `packed` takes the most used one that still has room, so
//     whole GPUs stay free. "In use" is derived from the request itself (advertised replicas
//     of a device minus its available ones), so the answer needs no state of its own except a
//     rotation cursor that spreads ties over GPUs from one call to the next.
//   - whole GPUs: NUMA-aligned: all devices from one NUMA node when one node has enough (the
//     node of must_include first, then the node with the fewest free devices that fits, which
//     keeps larger groups intact), else from as few nodes as possible.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/sync.h"
#include "core/node_config.h"
#include "core/resource_plan.h"
#include "core/status.h"
#include "deviceplugin/allocation.h"

namespace gpushare::deviceplugin {

struct PreferredAllocationQuery {
  std::vector<std::string> available;
  std::vector<std::string> must_include;
  int allocation_size = 0;
};

// A resource-specific replacement for PreferredAllocator (DevicePluginServerOptions::preferred):
// memory shares steer kubelet to the GPU the scheduler chose. Same contract as Choose().
using PreferredChooser = std::function<Result<std::vector<std::string>>(
    const DeviceIndex& index, const PreferredAllocationQuery& q)>;

class PreferredAllocator {
 public:
  explicit PreferredAllocator(AllocationPolicy policy) : policy_(policy) {}

  // kInvalidArgument when allocation_size < 1 or must_include is larger than allocation_size.
  // IDs the resource does not advertise are ignored (kubelet only sends advertised IDs).
  Result<std::vector<std::string>> Choose(const DeviceIndex& index,
                                          const PreferredAllocationQuery& q) GPUSHARE_EXCLUDES(mu_);

 private:
  AllocationPolicy policy_;
  Mutex mu_;
  uint64_t rotation_ GPUSHARE_GUARDED_BY(mu_) = 0;
};

}  // namespace gpushare::deviceplugin
