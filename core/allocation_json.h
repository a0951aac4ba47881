// The JSON form of gpushare.io/allocations (core/allocation_record.h), written by gpushare-node
// and read by `gpushare inspect` and gpushare-scheduler's /inspect. docs/node-agent.md
// ("Allocations") documents it:
//   {"v":1,"node":"n1","containers":[{"name":"c","resource":"nvidia.com/gpu","devices":[
//     {"id":"GPU-a::3","kind":"replica","gpu":0,"uuid":"GPU-a","replica":3}]}],
//    "gpus":[{"index":0,"uuid":"GPU-a","model":"NVIDIA A10","memoryMiB":23028}]}
// Optional device keys are left out when empty: replica (-1), mig, profile, units, memoryMiB
// (0); "truncated" only when something was left out. Pure: read with core/json.h, like every
// other annotation gpushare writes.
#pragma once

#include <string>
#include <string_view>

#include "core/allocation_record.h"
#include "core/status.h"

namespace gpushare::alloc {

// Compact JSON with the keys in a fixed order: an unchanged record encodes to the same bytes.
std::string EncodeAllocationRecord(const AllocationRecord& record);
// Tolerant of unknown keys (a newer agent may add some), strict on types and on the version
// (newer than kRecordVersion is refused). Errors name the field, e.g.
// `containers[0].devices[1].gpu: expected an integer`. Input over 256 KiB is refused.
Result<AllocationRecord> DecodeAllocationRecord(std::string_view json);

}  // namespace gpushare::alloc
