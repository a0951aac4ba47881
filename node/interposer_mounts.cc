// See interposer_mounts.h.
#include "node/interposer_mounts.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "base/logfmt.h"
#include "node/files.h"
#include "node/library_install.h"

namespace gpushare::node {
namespace {

std::string NewContainerId() {
  static std::atomic<uint64_t> counter{0};
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char id[96];
  snprintf(id, sizeof(id), "c-%lld%09ld-%d-%llu", static_cast<long long>(ts.tv_sec), ts.tv_nsec,
           static_cast<int>(getpid()), static_cast<unsigned long long>(counter.fetch_add(1)));
  return id;
}

}  // namespace

Result<InterposerSetup> PrepareInterposer(const std::vector<InterposerDevice>& devices,
                                          const InterposerMountOptions& options,
                                          const AllocationMarker& allocation) {
  if (options.state_dir.empty() || options.state_dir[0] != '/')
    return Status::InvalidArgument("gpushare.stateDir: must be an absolute path, got \"" +
                                   options.state_dir + "\"");
  InterposerOptions o;
  o.library_host_dir = options.library_host_dir;
  o.container_host_dir =
      options.state_dir + (options.state_dir.back() == '/' ? "" : "/") + NewContainerId();
  Result<InterposerSetup> setup = BuildInterposerSetup(devices, o);
  if (!setup.ok() || !setup->enforces_anything()) return setup;
  std::string library = o.library_host_dir + "/" + kLibraryFileName;
  if (access(library.c_str(), R_OK) != 0)
    return Status::FailedPrecondition(
        "gpushare.interposerHostDir: " + library +
        " is not readable; cannot enforce this container's GPU limits");
  GPUSHARE_RETURN_IF_ERROR(MakeDirs(options.state_dir));
  GPUSHARE_RETURN_IF_ERROR(MakeDir(o.container_host_dir, 0755));
  GPUSHARE_RETURN_IF_ERROR(MakeDir(o.container_host_dir + "/shared", 01777));
  GPUSHARE_RETURN_IF_ERROR(
      WriteFileAtomically(o.container_host_dir + "/config", setup->config_text, 0644));
  AllocationMarker marker = allocation;
  marker.library_dir = o.library_host_dir;
  GPUSHARE_RETURN_IF_ERROR(WriteFileAtomically(o.container_host_dir + "/" + kAllocationMarkerName,
                                               EncodeAllocationMarker(marker), 0644));
  // Last: a directory with ld.so.preload is one an Allocate answered with (node/library_gc.h).
  GPUSHARE_RETURN_IF_ERROR(
      WriteFileAtomically(o.container_host_dir + "/ld.so.preload", setup->preload_text, 0644));
  return setup;
}

deviceplugin::AllocationDecorator MakeInterposerDecorator(const InterposerMountOptions& options) {
  return [options](const deviceplugin::ResolvedRequest& request,
                   deviceplugin::ContainerAllocation* allocation) -> Status {
    AllocationMarker marker;
    marker.resource = request.resource != nullptr ? request.resource->name : "";
    for (const PlannedDevice* d : request.devices) marker.device_ids.push_back(d->id);
    std::vector<InterposerDevice> devices = InterposerDevicesFor(request.devices);
    if (allocation->sm_limit_percent > 0)  // the pod's compute share wins over the plan's
      for (InterposerDevice& d : devices) d.sm_limit_percent = allocation->sm_limit_percent;
    Result<InterposerSetup> setup = PrepareInterposer(devices, options, marker);
    if (!setup.ok()) return setup.status().WithContext("in-container GPU limits");
    for (const auto& [k, v] : setup->envs) allocation->envs[k] = v;
    for (const InterposerMount& m : setup->mounts)
      allocation->mounts.push_back(
          deviceplugin::MountSpec{m.container_path, m.host_path, m.read_only});
    return Status::Ok();
  };
}

DecoratorFactory InterposerDecoratorFactory(std::string library_source, std::string version,
                                            std::shared_ptr<InterposerPaths> paths) {
  return [library_source, version,
          paths](const AgentInputs& inputs) -> deviceplugin::AllocationDecorator {
    const GpushareSettings& g = inputs.config.gpushare;
    if (paths)
      paths->Loaded(g.container_state_dir, g.interposer_host_dir, "");  // no version known (yet)
    if (g.interposer_host_dir.empty()) return nullptr;
    if (library_source.empty())
      return MakeInterposerDecorator(
          InterposerMountOptions{g.interposer_host_dir, g.container_state_dir});
    Result<InstalledLibrary> installed =
        InstallLibrary(library_source, g.interposer_host_dir, version);
    if (installed.ok() && paths)
      paths->Loaded(g.container_state_dir, g.interposer_host_dir, installed->dir);
    if (!installed.ok()) {
      spdlog::error("event=interposer_install_failed source={} host_dir={} error={}",
                    logfmt::Value(library_source), logfmt::Value(g.interposer_host_dir),
                    logfmt::Value(installed.status().message()));
      Status failure = installed.status().WithContext("installing the in-container library");
      return [failure](const deviceplugin::ResolvedRequest& request,
                       deviceplugin::ContainerAllocation*) -> Status {
        // Containers without limits need no library.
        if (!AnyLimited(InterposerDevicesFor(request.devices))) return Status::Ok();
        return failure.WithContext("in-container GPU limits");
      };
    }
    spdlog::info("event=interposer_installed path={} written={}", logfmt::Value(installed->path),
                 installed->written);
    return MakeInterposerDecorator(InterposerMountOptions{installed->dir, g.container_state_dir});
  };
}

}  // namespace gpushare::node
