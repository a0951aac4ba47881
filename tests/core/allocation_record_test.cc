// gpushare.io/allocations: the record built from kubelet's allocations and the plan (every
// mode), its JSON form (core/allocation_json.h), which pods get patched, and the retry pacing.
#include "core/allocation_record.h"

#include <gtest/gtest.h>

#include "core/allocation_json.h"

namespace gpushare::alloc {
namespace {

const char* kGpu0 = "GPU-00000000-0000-4000-8000-000000000000";
const char* kGpu1 = "GPU-11111111-0000-4000-8000-000000000000";
const char* kMig = "MIG-22222222-0000-4000-8000-000000000000";

Inventory TwoGpus() {
  Inventory inv;
  Gpu g0;
  g0.index = 0;
  g0.uuid = kGpu0;
  g0.product = "NVIDIA A10";
  g0.memory_mib = 23028;
  Gpu g1;
  g1.index = 1;
  g1.uuid = kGpu1;
  g1.product = "NVIDIA A100 80GB PCIe";
  g1.memory_mib = 81920;
  g1.mig_enabled = true;
  MigInstance m;
  m.profile = "3g.40gb";
  m.uuid = kMig;
  m.memory_mib = 40192;
  g1.mig.push_back(m);
  inv.gpus = {g0, g1};
  return inv;
}

PlannedDevice Device(std::string id, int gpu, const std::string& uuid, int replica, uint64_t memory,
                     uint64_t limit) {
  PlannedDevice d;
  d.id = std::move(id);
  d.gpu_index = gpu;
  d.gpu_uuid = uuid;
  d.device_uuid = uuid;
  d.replica = replica;
  d.memory_mib = memory;
  d.memory_limit_mib = limit;
  return d;
}

// GPU 0 whole as nvidia.com/gpu, or time-sliced x4 as nvidia.com/gpu.shared (limit 5757 MiB);
// the MIG device of GPU 1 x3; memory units of GPU 0 (another plan of the same node).
ResourcePlan Plan() {
  ResourcePlan p;
  PlannedResource whole;
  whole.name = "nvidia.com/gpu";
  whole.devices.push_back(Device(kGpu0, 0, kGpu0, -1, 23028, 0));
  PlannedResource shared;
  shared.name = "nvidia.com/gpu.shared";
  shared.replicas = 4;
  for (int n = 0; n < 4; ++n)
    shared.devices.push_back(
        Device(std::string(kGpu0) + "::" + std::to_string(n), 0, kGpu0, n, 23028, 5757));
  PlannedResource mig;
  mig.name = "nvidia.com/mig-3g.40gb";
  mig.replicas = 3;
  for (int n = 0; n < 3; ++n) {
    PlannedDevice d =
        Device(std::string(kMig) + "::" + std::to_string(n), 1, kGpu1, n, 40192, 13397);
    d.is_mig = true;
    d.device_uuid = kMig;
    mig.devices.push_back(d);
  }
  PlannedResource mem;
  mem.name = "aliyun.com/gpu-mem";
  mem.unit_mib = 1024;
  for (int j = 0; j < 22; ++j) {
    PlannedDevice d =
        Device(std::string(kGpu0) + "-_-" + std::to_string(j), 0, kGpu0, -1, 23028, 1024);
    mem.devices.push_back(d);
  }
  p.resources = {mem, whole, shared, mig};
  return p;
}

TEST(AllocationRecord, EveryModeRecordsItsGpuAndShare) {
  std::vector<AllocatedDevices> allocated = {
      {"ml", "whole", "c", "nvidia.com/gpu", {kGpu0}},
      {"ml",
       "ts",
       "c",
       "nvidia.com/gpu.shared",
       {std::string(kGpu0) + "::3", std::string(kGpu0) + "::1"}},
      {"ml", "mig", "c", "nvidia.com/mig-3g.40gb", {std::string(kMig) + "::2"}},
      {"ml",
       "mem",
       "c",
       "aliyun.com/gpu-mem",
       {std::string(kGpu0) + "-_-4", std::string(kGpu0) + "-_-5", std::string(kGpu0) + "-_-6"}},
      {"ml", "mem", "side", "cpu-vendor.example/thing", {"x"}},  // not gpushare's: ignored
  };
  auto recs = BuildAllocationRecords("n1", Plan(), TwoGpus(), allocated);
  ASSERT_EQ(recs.size(), 4u);

  EXPECT_EQ(
      alloc::EncodeAllocationRecord(recs["ml/whole"]),
      R"({"v":1,"node":"n1","containers":[{"name":"c","resource":"nvidia.com/gpu","devices":[)"
      R"({"id":"GPU-00000000-0000-4000-8000-000000000000","kind":"whole","gpu":0,)"
      R"("uuid":"GPU-00000000-0000-4000-8000-000000000000","memoryMiB":23028}]}],)"
      R"("gpus":[{"index":0,"uuid":"GPU-00000000-0000-4000-8000-000000000000",)"
      R"("model":"NVIDIA A10","memoryMiB":23028}]})");

  const AllocationRecord& ts = recs["ml/ts"];
  ASSERT_EQ(ts.containers.size(), 1u);
  ASSERT_EQ(ts.containers[0].devices.size(), 2u);
  EXPECT_EQ(ts.containers[0].devices[0].kind, DeviceKind::kReplica);
  EXPECT_EQ(ts.containers[0].devices[0].replica, 1);  // sorted: kubelet's order is not stable
  EXPECT_EQ(ts.containers[0].devices[0].memory_mib, 5757);
  EXPECT_EQ(ts.containers[0].devices[1].replica, 3);
  // The same devices in another order: the same bytes.
  std::vector<AllocatedDevices> reordered = {
      {"ml",
       "ts",
       "c",
       "nvidia.com/gpu.shared",
       {std::string(kGpu0) + "::1", std::string(kGpu0) + "::3"}}};
  EXPECT_EQ(alloc::EncodeAllocationRecord(
                BuildAllocationRecords("n1", Plan(), TwoGpus(), reordered)["ml/ts"]),
            alloc::EncodeAllocationRecord(ts));

  const DeviceRecord& mig = recs["ml/mig"].containers[0].devices[0];
  EXPECT_EQ(mig.kind, DeviceKind::kMig);
  EXPECT_EQ(mig.gpu, 1);
  EXPECT_EQ(mig.uuid, kGpu1);
  EXPECT_EQ(mig.mig, kMig);
  EXPECT_EQ(mig.profile, "3g.40gb");
  EXPECT_EQ(mig.replica, 2);
  EXPECT_EQ(recs["ml/mig"].gpus.at(0).model, "NVIDIA A100 80GB PCIe");

  // Memory units of one GPU are one entry.
  const AllocationRecord& mem = recs["ml/mem"];
  ASSERT_EQ(mem.containers.size(), 1u);
  ASSERT_EQ(mem.containers[0].devices.size(), 1u);
  const DeviceRecord& u = mem.containers[0].devices[0];
  EXPECT_EQ(u.kind, DeviceKind::kMemory);
  EXPECT_EQ(u.units, 3);
  EXPECT_EQ(u.memory_mib, 3072);
  EXPECT_EQ(u.id, std::string(kGpu0) + "-_-4");
  // Kubelet's order of the units does not matter.
  std::vector<AllocatedDevices> units_reordered = {
      {"ml",
       "mem",
       "c",
       "aliyun.com/gpu-mem",
       {std::string(kGpu0) + "-_-6", std::string(kGpu0) + "-_-4", std::string(kGpu0) + "-_-5"}}};
  EXPECT_EQ(BuildAllocationRecords("n1", Plan(), TwoGpus(), units_reordered)["ml/mem"], mem);
}

TEST(AllocationRecord, UnknownIdsKeepWhatTheIdSays) {
  std::vector<AllocatedDevices> allocated = {
      {"ml", "old", "c", "nvidia.com/gpu.shared", {std::string(kGpu1) + "::7", "garbage"}}};
  auto recs = BuildAllocationRecords("n1", Plan(), TwoGpus(), allocated);
  const auto& d = recs["ml/old"].containers[0].devices;
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].gpu, -1);  // sorted by GPU: unknown first
  EXPECT_EQ(d[0].id, "garbage");
  EXPECT_EQ(d[1].kind, DeviceKind::kUnknown);
  EXPECT_EQ(d[1].gpu, 1);
  EXPECT_EQ(d[1].replica, 7);
}

TEST(AllocationRecord, BoundedInSize) {
  AllocatedDevices many{"ml", "big", "", "nvidia.com/gpu.shared", {}};
  for (int n = 0; n < 500; ++n)
    many.device_ids.push_back(std::string(kGpu0) + "::" + std::to_string(n));
  std::vector<AllocatedDevices> allocated;
  for (int c = 0; c < 100; ++c) {
    many.container = "c" + std::to_string(1000 + c);
    allocated.push_back(many);
  }
  auto recs = BuildAllocationRecords("n1", Plan(), TwoGpus(), allocated);
  const AllocationRecord& r = recs["ml/big"];
  EXPECT_EQ(r.containers.size(), kMaxContainers);
  EXPECT_EQ(r.truncated, 100 * 500 - static_cast<int64_t>(kMaxDevicesPerRecord));
  EXPECT_EQ(r.containers[0].devices.size(), kMaxDevicesPerRecord);
  EXPECT_TRUE(r.containers[1].devices.empty());
  const std::string json = alloc::EncodeAllocationRecord(r);
  EXPECT_LT(json.size(), 256u * 1024u) << json.size();
  Result<AllocationRecord> back = alloc::DecodeAllocationRecord(json);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, r);
}

TEST(AllocationRecord, JsonRoundTripAndErrors) {
  auto recs = BuildAllocationRecords(
      "n1", Plan(), TwoGpus(),
      {{"ml", "mig", "c", "nvidia.com/mig-3g.40gb", {std::string(kMig) + "::0"}},
       {"ml", "mig", "b", "nvidia.com/gpu", {kGpu0}}});
  const AllocationRecord& r = recs["ml/mig"];
  EXPECT_EQ(r.containers[0].name, "b");  // sorted
  Result<AllocationRecord> back = alloc::DecodeAllocationRecord(alloc::EncodeAllocationRecord(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, r);

  // Unknown keys and kinds are tolerated (a newer agent).
  auto newer = alloc::DecodeAllocationRecord(
      R"({"v":1,"extra":1,"containers":[{"name":"c","devices":[{"id":"x","kind":"dra","new":2}]}]})");
  ASSERT_TRUE(newer.ok()) << newer.status().message();
  EXPECT_EQ(newer->containers[0].devices[0].kind, DeviceKind::kUnknown);

  struct Bad {
    const char* json;
    const char* error;
  };
  for (const Bad& b : {
           Bad{"", "allocations: not valid JSON"},
           Bad{"[]", "allocations: expected an object, got array"},
           Bad{R"({"node":"n"})", "v: required"},
           Bad{R"({"v":2})", "v: version 2 is newer than this reader (1)"},
           Bad{R"({"v":1,"containers":{}})", "containers: expected an array, got object"},
           Bad{R"({"v":1,"containers":[{"devices":[]}]})", "containers[0].name: required"},
           Bad{R"({"v":1,"containers":[{"name":"c","devices":[{"id":"x","gpu":"0"}]}]})",
               "containers[0].devices[0].gpu: expected an integer, got string"},
           Bad{R"({"v":1,"gpus":[{"index":-3}]})", "gpus[0].index: out of range, got -3"},
       }) {
    Result<AllocationRecord> r2 = alloc::DecodeAllocationRecord(b.json);
    ASSERT_FALSE(r2.ok()) << b.json;
    EXPECT_EQ(r2.status().message(), b.error) << b.json;
  }
  EXPECT_FALSE(alloc::DecodeAllocationRecord(std::string(300 * 1024, ' ')).ok());
}

TEST(AllocationRecord, PatchesOnlyPodsBoundHereWhoseValueDiffers) {
  std::map<std::string, std::string> desired = {{"ns/new", "A"},     {"ns/same", "B"},
                                                {"ns/changed", "C"}, {"ns/elsewhere", "D"},
                                                {"ns/gone", "E"},    {"ns/nouid", "F"}};
  std::vector<PodState> pods = {
      {"ns/new", "u1", "n1", std::nullopt},
      {"ns/same", "u2", "n1", "B"},
      {"ns/changed", "u3", "n1", "old"},
      {"ns/elsewhere", "u4", "n2", std::nullopt},
      {"ns/other", "u5", "n1", "not ours to touch"},
      {"ns/nouid", "", "n1", std::nullopt},
  };
  std::vector<RecordPatch> patches = DecideRecordPatches("n1", desired, pods);
  ASSERT_EQ(patches.size(), 2u);
  EXPECT_EQ(patches[0].key, "ns/new");
  EXPECT_EQ(patches[0].uid, "u1");
  EXPECT_EQ(patches[0].value, "A");
  EXPECT_EQ(patches[1].key, "ns/changed");
  EXPECT_EQ(patches[1].value, "C");
}

TEST(AllocationRecord, OwnPatchesCountWhileTheCacheShowsTheVersionTheyWereDecidedOn) {
  RecordWrites w;
  const RecordPatch patch{"ns/p", "u1", "A", "10"};
  w.Wrote(patch);
  // The cache still holds version 10 without the value: the patch counts as in place.
  PodState stale = w.Current({"ns/p", "u1", "n1", std::nullopt, "10"});
  ASSERT_TRUE(stale.value.has_value());
  EXPECT_EQ(*stale.value, "A");
  EXPECT_TRUE(DecideRecordPatches("n1", {{"ns/p", "A"}}, {stale}).empty());
  // A namesake with another UID at the same version string is not covered.
  EXPECT_FALSE(w.Current({"ns/p", "u2", "n1", std::nullopt, "10"}).value.has_value());
  EXPECT_EQ(w.size(), 0u);  // and the entry is gone

  // The watch caught up (version 11, with the value): the cache is the truth, the entry dropped.
  w.Wrote(patch);
  PodState caught = w.Current({"ns/p", "u1", "n1", "A", "11"});
  EXPECT_EQ(*caught.value, "A");
  EXPECT_EQ(w.size(), 0u);
  // Someone else then changed it (version 12): it is patched again.
  PodState changed = w.Current({"ns/p", "u1", "n1", "B", "12"});
  std::vector<RecordPatch> again = DecideRecordPatches("n1", {{"ns/p", "A"}}, {changed});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].seen, "12");

  w.Wrote(patch);
  w.Retain({{"ns/q", ""}});
  EXPECT_EQ(w.size(), 0u);
}

TEST(AllocationRecord, BackoffDoublesAndForgets) {
  RecordBackoff b(1000, 4000);
  EXPECT_TRUE(b.Allowed("p", 0));
  b.Failed("p", 0);
  EXPECT_FALSE(b.Allowed("p", 999));
  EXPECT_TRUE(b.Allowed("p", 1000));
  b.Failed("p", 1000);  // 2 s
  EXPECT_FALSE(b.Allowed("p", 2999));
  EXPECT_TRUE(b.Allowed("p", 3000));
  b.Failed("p", 3000);  // 4 s
  b.Failed("p", 7000);  // capped at 4 s
  EXPECT_FALSE(b.Allowed("p", 10999));
  EXPECT_TRUE(b.Allowed("p", 11000));
  b.Retain({{"q", ""}});
  EXPECT_EQ(b.size(), 0u);
  b.Failed("q", 0);
  b.Succeeded("q");
  EXPECT_TRUE(b.Allowed("q", 0));
}

}  // namespace
}  // namespace gpushare::alloc
