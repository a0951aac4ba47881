// context_charge.h: what a CUDA context is charged against the container's limit.
//
// A context holds device memory the process never asked for (its state, the local-memory
// reservation, loaded module code): about 518 MiB on an H200 with a 13.x driver, 250-500 MiB
// elsewhere (docs/gpu-checks.md). A fixed estimate either lets every container exceed its share
// (estimate too low: a neighbour is pushed into OOM) or refuses memory the container owns (too
// high). So the figure is measured on the running driver: the device's used memory, as NVML
// reports it, just before and just after the driver creates the context (runtime.cc). The
// difference is the context's cost unless another process allocated or freed meanwhile; a
// difference outside [kMinPlausibleContext, kMaxPlausibleContext] is not believed.
//
// In order, the first that applies:
//   1. `context_charge=fixed`: the configured `context_overhead` (default kDefaultContextOverhead);
//   2. a believable measurement of this context, but never less than the figure measured
//      earlier on the same device by this container's processes (a neighbour freeing memory
//      during the creation makes a reading too low; one allocating makes it too high, and then
//      only the next context inherits it, since the region keeps each context's own reading);
//   3. that earlier figure (the region keeps it, per device: the same GPU model and driver in one
//      container);
//   4. the configured `context_overhead` when one is set ("override");
//   5. kDefaultContextOverhead ("default").
// Pure: no I/O, no driver call.
#pragma once

#include <stdint.h>

#include "interpose/region_layout.h"

namespace gpushare::interpose {

// A difference below this is a driver that reports nothing (or a neighbour freeing meanwhile);
// above it, a neighbour allocating meanwhile. Real contexts measured: 250-600 MiB.
inline constexpr uint64_t kMinPlausibleContext = 16ull << 20;
inline constexpr uint64_t kMaxPlausibleContext = 4ull << 30;

// ChargeSource (where a charge came from) is in region_layout.h: the region stores it.
const char* ChargeSourceName(ChargeSource s);

struct ContextChargeInput {
  bool fixed = false;         // context_charge=fixed
  bool overhead_set = false;  // context_overhead configured (file or environment)
  uint64_t overhead = 0;      // its value (the default constant when not set)
  bool measured = false;      // both readings were taken
  uint64_t used_before = 0;   // device memory used just before the creation
  uint64_t used_after = 0;    // and just after
  uint64_t earlier = 0;       // the region's earlier measurement on this device, 0 = none
};

struct ContextCharge {
  uint64_t bytes = 0;
  ChargeSource source = ChargeSource::kNone;
  uint64_t measured = 0;  // this context's own believable reading (0 = none): what the region keeps
};

ContextCharge DecideContextCharge(const ContextChargeInput& in);

}  // namespace gpushare::interpose
