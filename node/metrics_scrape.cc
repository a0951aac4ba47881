// See metrics_scrape.h.
#include "node/metrics_scrape.h"

#include <dirent.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "base/logfmt.h"
#include "core/library_gc.h"

namespace gpushare::node {

using logfmt::Value;

namespace {

constexpr size_t kMaxMarkerBytes = 64 * 1024;
constexpr size_t kMaxLoggedSkips = 1024;

bool ReadSmallFile(const std::string& path, std::string* out, int64_t* mtime_ns) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size > static_cast<off_t>(kMaxMarkerBytes))
    return false;
  *mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

}  // namespace

std::string RegionPathOf(const std::string& state_subdir) {
  return state_subdir + "/shared/region";
}

std::vector<ContainerRegion> ReadContainerRegions(
    const std::string& state_dir, const std::set<std::string>& wanted,
    const RegionReaderOptions& reader,
    const std::function<void(const std::string& path, RegionSkip why)>& skipped) {
  std::vector<ContainerRegion> out;
  DIR* d = ::opendir(state_dir.c_str());
  if (d == nullptr) return out;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  for (const std::string& n : names) {
    ContainerRegion c;
    c.dir = state_dir + (state_dir.back() == '/' ? "" : "/") + n;
    std::string text;
    if (!ReadSmallFile(c.dir + "/" + kAllocationMarkerName, &text, &c.marker_mtime_ns)) continue;
    Result<AllocationMarker> m = ParseAllocationMarker(text);
    if (!m.ok()) continue;
    c.marker = std::move(*m);
    if (wanted.count(AllocationKey(c.marker.resource, c.marker.device_ids)) != 0) {
      RegionSkip why = RegionSkip::kNone;
      const std::string path = RegionPathOf(c.dir);
      c.reading = ReadRegion(path, reader, &why);
      c.has_region = why == RegionSkip::kNone;
      // A container that has not started CUDA yet has no region: not worth a count.
      if (why != RegionSkip::kNone && why != RegionSkip::kMissing && skipped) skipped(path, why);
    }
    out.push_back(std::move(c));
  }
  return out;
}

MetricsScraper::MetricsScraper(std::shared_ptr<NodeMetrics> metrics, ScrapeSources sources)
    : metrics_(std::move(metrics)),
      sources_(std::move(sources)),
      locks_complete_(InInitialPidNamespace()) {}

MetricsScraper::~MetricsScraper() = default;

ScrapeInput MetricsScraper::Gather() {
  MutexLock l(&mu_);
  return GatherLocked();
}

ScrapeInput MetricsScraper::GatherLocked() {
  ScrapeInput in;
  in.node_name = sources_.node_name;
  in.node = metrics_->View();
  in.now_s = (sources_.clock ? sources_.clock : RealClock())->UnixNs() / 1'000'000'000;
  if (!in.node.loaded) return in;
  if (!sources_.pod_resources_socket.empty()) {
    if (!pods_) pods_ = std::make_unique<PodResourcesClient>(sources_.pod_resources_socket);
    Result<std::vector<ContainerDevices>> pods = pods_->List(sources_.pod_resources_timeout);
    if (pods.ok()) {
      in.pods_known = true;
      in.pods = std::move(*pods);
    } else {
      spdlog::warn("event=metrics_pod_resources_failed error={}", Value(pods.status().message()));
    }
  }
  std::set<std::string> wanted;
  for (const ContainerDevices& c : in.pods) wanted.insert(AllocationKey(c.resource, c.device_ids));
  if (wanted.empty()) return in;
  std::set<std::string> dirs;
  if (!in.node.state_dir.empty()) dirs.insert(in.node.state_dir);
  if (sources_.extra_state_dirs)
    for (const std::string& d : sources_.extra_state_dirs()) dirs.insert(d);
  RegionReaderOptions reader;
  reader.locks_known = ReadFlockedFiles(&reader.flocked, sources_.proc_locks);
  reader.locks_complete = locks_complete_;
  std::vector<std::pair<std::string, RegionSkip>> skips;
  auto skipped = [&skips](const std::string& path, RegionSkip why) {
    skips.emplace_back(path, why);
  };
  for (const std::string& d : dirs) {
    std::vector<ContainerRegion> r = ReadContainerRegions(d, wanted, reader, skipped);
    in.regions.insert(in.regions.end(), std::make_move_iterator(r.begin()),
                      std::make_move_iterator(r.end()));
  }
  for (const auto& [path, why] : skips) {
    metrics_->RegionSkipped(why);
    if (logged_skips_.size() < kMaxLoggedSkips && logged_skips_.insert(path).second)
      spdlog::warn("event=region_skipped path={} reason={}", Value(path), RegionSkipName(why));
  }
  return in;
}

std::string MetricsScraper::Scrape() {
  const auto start = std::chrono::steady_clock::now();
  MutexLock l(&mu_);
  std::string text = metrics_->Exposition(GatherLocked());
  metrics_->ScrapeTook(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return text;
}

}  // namespace gpushare::node
