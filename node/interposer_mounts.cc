// See interposer_mounts.h.
#include "node/interposer_mounts.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

namespace gpushare::node {
namespace {

Status Errno(const std::string& what, const std::string& path) {
  return Status::Unavailable(what + " " + path + ": " + std::strerror(errno));
}

Status MakeDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return Errno("cannot create", path);
  if (chmod(path.c_str(), mode) != 0) return Errno("cannot set permissions of", path);  // umask-proof
  return Status::Ok();
}

Status MakeDirs(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    std::string prefix = path.substr(0, at);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return Errno("cannot create", prefix);
  }
  return Status::Ok();
}

// Writes a file atomically: temporary name in the same directory, fsync, rename.
Status WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Errno("cannot write", tmp);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = Errno("cannot write", tmp);
      close(fd);
      unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  bool ok = fsync(fd) == 0 && fchmod(fd, mode) == 0;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = Errno("cannot finish", path);
    unlink(tmp.c_str());
    return s;
  }
  return Status::Ok();
}

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
                                          const InterposerMountOptions& options) {
  if (options.state_dir.empty() || options.state_dir[0] != '/')
    return Status::InvalidArgument("gpushare.stateDir: must be an absolute path, got \"" + options.state_dir + "\"");
  InterposerOptions o;
  o.library_host_dir = options.library_host_dir;
  o.container_host_dir = options.state_dir + (options.state_dir.back() == '/' ? "" : "/") + NewContainerId();
  Result<InterposerSetup> setup = BuildInterposerSetup(devices, o);
  if (!setup.ok() || !setup->enforces_anything()) return setup;
  std::string library = o.library_host_dir + "/" + kLibraryFileName;
  if (access(library.c_str(), R_OK) != 0)
    return Status::FailedPrecondition("gpushare.interposerHostDir: " + library +
                                      " is not readable; cannot enforce this container's GPU limits");
  GPUSHARE_RETURN_IF_ERROR(MakeDirs(options.state_dir));
  GPUSHARE_RETURN_IF_ERROR(MakeDir(o.container_host_dir, 0755));
  GPUSHARE_RETURN_IF_ERROR(MakeDir(o.container_host_dir + "/shared", 01777));
  GPUSHARE_RETURN_IF_ERROR(WriteFile(o.container_host_dir + "/config", setup->config_text, 0644));
  GPUSHARE_RETURN_IF_ERROR(WriteFile(o.container_host_dir + "/ld.so.preload", setup->preload_text, 0644));
  return setup;
}

deviceplugin::AllocationDecorator MakeInterposerDecorator(const InterposerMountOptions& options) {
  return [options](const deviceplugin::ResolvedRequest& request,
                   deviceplugin::ContainerAllocation* allocation) -> Status {
    Result<InterposerSetup> setup = PrepareInterposer(InterposerDevicesFor(request.devices), options);
    if (!setup.ok()) return setup.status().WithContext("in-container GPU limits");
    for (const auto& [k, v] : setup->envs) allocation->envs[k] = v;
    for (const InterposerMount& m : setup->mounts)
      allocation->mounts.push_back(deviceplugin::MountSpec{m.container_path, m.host_path, m.read_only});
    return Status::Ok();
  };
}

DecoratorFactory InterposerDecoratorFactory() {
  return [](const AgentInputs& inputs) -> deviceplugin::AllocationDecorator {
    const GpushareSettings& g = inputs.config.gpushare;
    if (g.interposer_host_dir.empty()) return nullptr;
    return MakeInterposerDecorator(InterposerMountOptions{g.interposer_host_dir, g.container_state_dir});
  };
}

}  // namespace gpushare::node
