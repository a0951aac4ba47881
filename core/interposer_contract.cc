// See interposer_contract.h. The config file format is the one interpose/config.h parses;
// tests/interpose/interposer_contract_test.cc feeds this output through that parser.
#include "core/interposer_contract.h"

#include <algorithm>
#include <sstream>

#include "base/strings.h"
#include "core/memshare.h"

namespace gpushare {
namespace {

bool Absolute(const std::string& p) {
  return !p.empty() && p[0] == '/';
}

}  // namespace

std::vector<InterposerDevice> InterposerDevicesFor(
    const std::vector<const PlannedDevice*>& devices) {
  // Per underlying device: the sums, and whether every one of its planned devices had a limit.
  struct Sum {
    std::string uuid;
    uint64_t memory_mib = 0, share_ppm = 0;
    bool all_limited = true, all_shared = true;
    uint64_t milli = 0, gpu_memory_mib = 0;  // alibabacloud.com/gpu-milli devices
  };
  std::vector<Sum> sums;
  for (const PlannedDevice* d : devices) {
    if (d == nullptr) continue;
    size_t i = 0;
    while (i < sums.size() && sums[i].uuid != d->device_uuid) ++i;
    if (i == sums.size()) sums.push_back(Sum{d->device_uuid});
    Sum& s = sums[i];
    s.memory_mib += d->memory_limit_mib;
    s.share_ppm += d->sm_share_ppm;
    s.all_limited = s.all_limited && d->memory_limit_mib != 0;
    s.all_shared = s.all_shared && d->sm_share_ppm != 0;
    s.milli += d->gpu_milli;
    s.gpu_memory_mib = d->memory_mib;
  }
  // Milli devices: the exact fraction of the GPU's memory (a per-device sum would lose up to a
  // MiB per milli to rounding); all 1,000 of them are the whole GPU, no limit.
  for (Sum& s : sums) {
    if (s.milli == 0) continue;
    s.memory_mib =
        s.milli >= static_cast<uint64_t>(memshare::kMilliPerGpu)
            ? 0
            : static_cast<uint64_t>(memshare::MilliOfMemoryMiB(
                  static_cast<int64_t>(s.milli), static_cast<int64_t>(s.gpu_memory_mib)));
    s.all_limited = s.all_limited && s.memory_mib != 0;
  }
  std::vector<InterposerDevice> out;
  for (const Sum& s : sums) {
    // SM limit: whole percent rounded down, at least 1. All of a device (up to the rounding of
    // 1e6/replicas: every replica of it) is no limit.
    const bool whole = s.share_ppm >= 999'000u;
    const uint32_t pct = static_cast<uint32_t>(std::max<uint64_t>(1, s.share_ppm / 10'000u));
    out.push_back(InterposerDevice{s.uuid, s.all_limited ? s.memory_mib : 0,
                                   s.all_shared && !whole ? pct : 0});
  }
  return out;
}

bool AnyLimited(const std::vector<InterposerDevice>& devices) {
  for (const InterposerDevice& d : devices) {
    if (d.memory_limit_mib != 0 || (d.sm_limit_percent != 0 && d.sm_limit_percent != 100))
      return true;
  }
  return false;
}

Result<InterposerSetup> BuildInterposerSetup(const std::vector<InterposerDevice>& devices,
                                             const InterposerOptions& options) {
  InterposerSetup setup;
  for (size_t i = 0; i < devices.size(); ++i) {
    const InterposerDevice& d = devices[i];
    if (d.uuid.empty())
      return Status::InvalidArgument("interposer: device " + std::to_string(i) + " has no UUID");
    if (d.sm_limit_percent > 100)
      return Status::InvalidArgument("interposer: device " + d.uuid +
                                     ": SM limit must be 0..100, got " +
                                     std::to_string(d.sm_limit_percent));
  }
  if (!AnyLimited(devices)) return setup;
  if (!Absolute(options.library_host_dir))
    return Status::InvalidArgument("gpushare.interposerHostDir: must be an absolute path, got \"" +
                                   options.library_host_dir + "\"");
  if (!Absolute(options.container_host_dir))
    return Status::InvalidArgument(
        "interposer: container directory must be an absolute path, got \"" +
        options.container_host_dir + "\"");

  std::ostringstream config;
  config
      << "# Written by gpushare-node Allocate; read by libgpushare-cuda.so (docs/interposer.md).\n"
      << "version=1\n"
      << "region=" << kContainerRegionPath << "\n";
  if (options.context_overhead_mib != 0)
    config << "context_overhead=" << options.context_overhead_mib << "m\n";
  for (size_t i = 0; i < devices.size(); ++i) {
    const InterposerDevice& d = devices[i];
    std::string idx = std::to_string(i);
    config << "device." << idx << ".uuid=" << d.uuid << "\n";
    config << "device." << idx << ".memory_limit=" << d.memory_limit_mib << "m\n";
    uint32_t sm = d.sm_limit_percent >= 100 ? 0 : d.sm_limit_percent;
    config << "device." << idx << ".sm_limit=" << sm << "\n";
    if (d.memory_limit_mib != 0)
      setup.envs["CUDA_DEVICE_MEMORY_LIMIT_" + idx] = std::to_string(d.memory_limit_mib) + "m";
    if (sm != 0) setup.envs["CUDA_DEVICE_SM_LIMIT_" + idx] = std::to_string(sm);
  }
  setup.envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = kContainerRegionPath;
  setup.config_text = config.str();
  setup.preload_text = std::string(kContainerLibraryPath) + "\n";
  setup.mounts = {
      {kContainerLibraryPath, JoinPath(options.library_host_dir, kLibraryFileName), true},
      {kContainerSharedDir, JoinPath(options.container_host_dir, "shared"), false},
      {kContainerConfigPath, JoinPath(options.container_host_dir, "config"), true},
      {kContainerPreloadPath, JoinPath(options.container_host_dir, "ld.so.preload"), true},
  };
  return setup;
}

}  // namespace gpushare
