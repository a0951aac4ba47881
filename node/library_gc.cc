// See library_gc.h.
#include "node/library_gc.h"

#include <dirent.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "base/logfmt.h"
#include "base/strings.h"
#include "core/interposer_contract.h"
#include "node/periodic.h"
#include "node/pod_resources.h"

namespace gpushare::node {
namespace {

using logfmt::Value;

constexpr size_t kMaxMarkerBytes = 64 * 1024;

// Seconds since the later of the last modification and the last change of `path`'s inode.
bool AgeOf(const std::string& path, int64_t now_s, int64_t* age_s) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return false;
  *age_s = now_s - std::max<int64_t>(st.st_mtim.tv_sec, st.st_ctim.tv_sec);
  return true;
}

bool IsDir(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Names in `dir` not starting with '.'; false when it exists and cannot be listed.
bool ListNames(const std::string& dir, std::vector<std::string>* names) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return errno == ENOENT;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names->push_back(e->d_name);
  }
  closedir(d);
  std::sort(names->begin(), names->end());
  return true;
}

std::optional<std::string> ReadSmall(const std::string& path) {
  FILE* f = fopen(path.c_str(), "re");
  if (f == nullptr) return std::nullopt;
  std::string s(kMaxMarkerBytes + 1, '\0');
  size_t n = fread(s.data(), 1, s.size(), f);
  fclose(f);
  if (n > kMaxMarkerBytes) return std::nullopt;
  s.resize(n);
  return s;
}

// "<version>-<16 hex digits>": what node/library_install.h names an installed version.
bool IsVersionDirName(const std::string& n) {
  if (n.size() < 18 || n[n.size() - 17] != '-') return false;
  return std::all_of(n.end() - 16, n.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool Remove(const std::string& path, const char* event, const std::string& reason) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) {
    spdlog::warn("event={}_failed path={} error={}", event, Value(path), Value(ec.message()));
    return false;
  }
  spdlog::info("event={} path={} reason={}", event, Value(path), Value(reason));
  return true;
}

}  // namespace

void InterposerPaths::Loaded(const std::string& state_dir, const std::string& host_dir,
                             const std::string& current_library_dir) {
  MutexLock lock(&mu_);
  if (!state_dir.empty() && std::find(view_.state_dirs.begin(), view_.state_dirs.end(),
                                      state_dir) == view_.state_dirs.end()) {
    view_.state_dirs.push_back(state_dir);
  }
  view_.host_dir = host_dir;
  view_.current_library_dir = current_library_dir;
  view_.loaded = true;
}

InterposerPaths::View InterposerPaths::Get() const {
  MutexLock lock(&mu_);
  return view_;
}

GcPlan CollectOnce(const InterposerPaths::View& paths, const LiveDeviceLister& live, int64_t now_s,
                   int64_t grace_s) {
  GcInput in;
  in.grace_s = grace_s;
  in.current_library_dir = paths.current_library_dir;
  for (const std::string& root : paths.state_dirs) {
    std::vector<std::string> names;
    if (!ListNames(root, &names)) {
      spdlog::warn("event=gc_list_failed dir={} error={}", Value(root),
                   Value(std::strerror(errno)));
      in.state_dirs_listed = false;
      continue;
    }
    for (const std::string& n : names) {
      StateDirSeen d;
      d.path = JoinPath(root, n);
      if (!IsDir(d.path) || !AgeOf(d.path, now_s, &d.age_s)) continue;
      struct stat st;
      d.answered = lstat(JoinPath(d.path, "ld.so.preload").c_str(), &st) == 0;
      if (std::optional<std::string> text = ReadSmall(JoinPath(d.path, kAllocationMarkerName))) {
        Result<AllocationMarker> m = ParseAllocationMarker(*text);
        d.marked = m.ok();
        if (m.ok()) d.marker = std::move(m).value();
      }
      in.state_dirs.push_back(std::move(d));
    }
  }
  if (!paths.host_dir.empty()) {
    std::vector<std::string> names;
    if (!ListNames(paths.host_dir, &names)) {
      spdlog::warn("event=gc_list_failed dir={} error={}", Value(paths.host_dir),
                   Value(std::strerror(errno)));
    }
    for (const std::string& n : names) {
      LibraryDirSeen l;
      l.path = JoinPath(paths.host_dir, n);
      if (IsVersionDirName(n) && IsDir(l.path) && AgeOf(l.path, now_s, &l.age_s))
        in.library_dirs.push_back(l);
    }
  }
  Result<std::set<LiveDevice>> listed = live();
  in.live_listed = listed.ok();
  if (listed.ok()) in.live = std::move(listed).value();

  GcPlan plan = PlanCollection(in);
  if (!plan.skipped.empty()) {
    spdlog::warn("event=gc_skipped reason={} error={}", Value(plan.skipped),
                 Value(listed.status().message()));
    return plan;
  }
  for (const std::string& p : plan.kept_unmarked) {
    spdlog::info(
        "event=state_dir_kept path={} reason={}", Value(p),
        Value("no allocation marker: its use is unknown, so no library version is removed"));
  }
  for (const GcRemoval& r : plan.state_dirs) Remove(r.path, "state_dir_removed", r.reason);
  for (const GcRemoval& r : plan.library_dirs) Remove(r.path, "library_removed", r.reason);
  return plan;
}

std::unique_ptr<Companion> StartLibraryGc(std::shared_ptr<InterposerPaths> paths,
                                          LibraryGcOptions options) {
  if (options.interval_ms <= 0) {
    spdlog::info("event=gc_disabled");
    return nullptr;
  }
  auto client = std::make_shared<PodResourcesClient>(options.pod_resources_socket);
  LiveDeviceLister live = [client]() -> Result<std::set<LiveDevice>> {
    Result<std::vector<ContainerDevices>> list = client->List(std::chrono::milliseconds(5000));
    if (!list.ok()) return list.status();
    std::set<LiveDevice> out;
    for (const ContainerDevices& c : *list) {
      for (const std::string& id : c.device_ids) out.insert({c.resource, id});
    }
    return out;
  };
  spdlog::info("event=gc_started interval_ms={} grace_s={} pod_resources={}", options.interval_ms,
               kGcGraceSeconds, Value(options.pod_resources_socket));
  const int64_t interval = options.interval_ms;
  return std::make_unique<PeriodicThread>([paths, live, interval](int64_t now) -> int64_t {
    InterposerPaths::View v = paths->Get();
    if (v.loaded) CollectOnce(v, live, static_cast<int64_t>(time(nullptr)));
    return now + interval;
  });
}

}  // namespace gpushare::node
