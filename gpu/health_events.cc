#include "gpu/health_events.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <thread>

namespace gpushare {

Result<std::optional<HealthEvent>> ParseHealthEventLine(const std::string& raw) {
  std::string line = raw.substr(0, raw.find('#'));
  std::istringstream in(line);
  std::string tok;
  std::vector<std::string> toks;
  while (in >> tok) toks.push_back(tok);
  if (toks.empty()) return std::optional<HealthEvent>();
  HealthEvent e;
  bool have_kind = false;
  for (const auto& t : toks) {
    if (t == "lost") {
      if (have_kind) return Status::InvalidArgument("\"" + raw + "\": more than one event kind");
      e.kind = HealthEventKind::kDeviceLost;
      have_kind = true;
      continue;
    }
    size_t eq = t.find('=');
    if (eq == std::string::npos) {
      return Status::InvalidArgument("\"" + raw + "\": unknown word \"" + t +
                                     "\" (expected xid=<n>, uuid=<GPU-...|MIG-...> or lost)");
    }
    std::string k = t.substr(0, eq), v = t.substr(eq + 1);
    if (k == "xid") {
      if (have_kind) return Status::InvalidArgument("\"" + raw + "\": more than one event kind");
      if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) {
        return Status::InvalidArgument("\"" + raw + "\": xid must be a number, got \"" + v + "\"");
      }
      e.kind = HealthEventKind::kXid;
      e.xid = static_cast<uint32_t>(std::stoul(v));
      have_kind = true;
    } else if (k == "uuid") {
      if (!IsGpuUuid(v) && !IsMigUuid(v)) {
        return Status::InvalidArgument(
            "\"" + raw + "\": uuid must be GPU-<uuid> or MIG-<uuid>, got \"" + v + "\"");
      }
      e.uuid = v;
    } else {
      return Status::InvalidArgument("\"" + raw + "\": unknown key \"" + k +
                                     "\" (expected xid, uuid)");
    }
  }
  if (!have_kind) return Status::InvalidArgument("\"" + raw + "\": needs xid=<n> or lost");
  e.detail = "injected";
  return std::optional<HealthEvent>(e);
}

namespace {

// Follows a file from its start; a replaced or truncated file is read again from the start.
class EventsFileSource : public HealthEventSource {
 public:
  EventsFileSource(std::string path, std::shared_ptr<Clock> clock)
      : path_(std::move(path)), clock_(std::move(clock)) {}

  Result<HealthPoll> Wait(std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      HealthPoll poll = ReadNew();
      if (!poll.events.empty() || !poll.problems.empty()) return poll;
      auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return poll;
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          std::chrono::milliseconds(20), deadline - now));
    }
  }

 private:
  HealthPoll ReadNew() {
    HealthPoll poll;
    struct stat st {};
    if (stat(path_.c_str(), &st) != 0) return poll;  // not there (yet)
    if (st.st_ino != inode_ || static_cast<uint64_t>(st.st_size) < offset_) {
      inode_ = st.st_ino;
      offset_ = 0;
      partial_.clear();
    }
    if (static_cast<uint64_t>(st.st_size) == offset_) return poll;
    std::ifstream in(path_, std::ios::binary);
    if (!in) return poll;
    in.seekg(static_cast<std::streamoff>(offset_));
    std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    offset_ += chunk.size();
    partial_ += chunk;
    size_t start = 0;
    while (true) {
      size_t nl = partial_.find('\n', start);
      if (nl == std::string::npos) break;
      std::string line = partial_.substr(start, nl - start);
      start = nl + 1;
      ++line_no_;
      auto parsed = ParseHealthEventLine(line);
      if (!parsed.ok()) {
        poll.problems.push_back(path_ + ":" + std::to_string(line_no_) + ": " +
                                parsed.status().message());
        continue;
      }
      if (!parsed->has_value()) continue;
      HealthEvent e = **parsed;
      e.time_ms = clock_->NowMs();
      e.detail = "injected from " + path_ + ":" + std::to_string(line_no_);
      poll.events.push_back(std::move(e));
    }
    partial_.erase(0, start);
    return poll;
  }

  std::string path_;
  std::shared_ptr<Clock> clock_;
  ino_t inode_ = 0;
  uint64_t offset_ = 0;
  uint64_t line_no_ = 0;
  std::string partial_;
};

class NvmlHealthEventSource : public HealthEventSource {
 public:
  NvmlHealthEventSource(std::shared_ptr<NvmlLibrary> nvml, Inventory inventory, nvmlEventSet_t set,
                        std::shared_ptr<Clock> clock)
      : nvml_(std::move(nvml)),
        inventory_(std::move(inventory)),
        set_(set),
        clock_(std::move(clock)) {}
  ~NvmlHealthEventSource() override {
    if (set_ != nullptr && nvml_->EventSetFree != nullptr) nvml_->EventSetFree(set_);
  }

  Result<HealthPoll> Wait(std::chrono::milliseconds timeout) override {
    HealthPoll poll;
    nvmlEventData_t data = {};
    auto ms = static_cast<unsigned>(std::max<int64_t>(0, timeout.count()));
    nvmlReturn_t r = nvml_->EventSetWait(set_, &data, ms);
    if (r == NVML_ERROR_TIMEOUT) return poll;
    if (r == NVML_ERROR_GPU_IS_LOST) {
      HealthEvent e;
      e.kind = HealthEventKind::kDeviceLost;
      e.time_ms = clock_->NowMs();
      e.detail = "nvmlEventSetWait_v2: " + nvml_->ErrorString(r);
      poll.events.push_back(e);
      return poll;
    }
    if (r != NVML_SUCCESS) return nvml_->Error("nvmlEventSetWait_v2", r);
    if (data.eventType != nvmlEventTypeXidCriticalError) return poll;
    HealthEvent e;
    e.kind = HealthEventKind::kXid;
    e.xid = static_cast<uint32_t>(data.eventData);
    e.time_ms = clock_->NowMs();
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (data.device == nullptr ||
        nvml_->DeviceGetUUID(data.device, uuid, sizeof(uuid)) != NVML_SUCCESS) {
      // As NVIDIA: an event we cannot attribute counts against every GPU.
      e.detail = "event for a device whose UUID cannot be read";
      poll.events.push_back(e);
      return poll;
    }
    e.uuid = uuid;
    const Gpu* g = inventory_.FindByUuid(e.uuid);
    if (g != nullptr && g->mig_enabled && data.gpuInstanceId != NVML_INVALID_INSTANCE_ID &&
        data.computeInstanceId != NVML_INVALID_INSTANCE_ID) {
      for (const auto& m : g->mig) {
        if (m.gpu_instance_id == static_cast<int>(data.gpuInstanceId) &&
            m.compute_instance_id == static_cast<int>(data.computeInstanceId)) {
          e.uuid = m.uuid;
          break;
        }
      }
    }
    e.detail = "nvml";
    poll.events.push_back(e);
    return poll;
  }

 private:
  std::shared_ptr<NvmlLibrary> nvml_;
  Inventory inventory_;
  nvmlEventSet_t set_;
  std::shared_ptr<Clock> clock_;
};

}  // namespace

std::unique_ptr<HealthEventSource> MakeEventsFileSource(std::string path,
                                                        std::shared_ptr<Clock> clock) {
  return std::make_unique<EventsFileSource>(std::move(path), std::move(clock));
}

Result<std::unique_ptr<HealthEventSource>> MakeNvmlHealthEventSource(
    std::shared_ptr<NvmlLibrary> nvml, const Inventory& inventory, std::shared_ptr<Clock> clock) {
  if (nvml->EventSetCreate == nullptr || nvml->DeviceRegisterEvents == nullptr ||
      nvml->EventSetWait == nullptr) {
    return Status::FailedPrecondition(nvml->path() + " lacks the NVML event entry points");
  }
  nvmlEventSet_t set = nullptr;
  if (nvmlReturn_t r = nvml->EventSetCreate(&set); r != NVML_SUCCESS) {
    return nvml->Error("nvmlEventSetCreate", r);
  }
  int registered = 0;
  std::string skipped;
  for (const auto& g : inventory.gpus) {
    nvmlDevice_t dev = nullptr;
    nvmlReturn_t r = nvml->DeviceGetHandleByIndex(static_cast<unsigned>(g.index), &dev);
    if (r != NVML_SUCCESS) continue;
    unsigned long long supported = nvmlEventTypeXidCriticalError;
    if (nvml->DeviceGetSupportedEventTypes != nullptr &&
        nvml->DeviceGetSupportedEventTypes(dev, &supported) != NVML_SUCCESS) {
      supported = 0;
    }
    if ((supported & nvmlEventTypeXidCriticalError) == 0 ||
        nvml->DeviceRegisterEvents(dev, nvmlEventTypeXidCriticalError, set) != NVML_SUCCESS) {
      skipped += (skipped.empty() ? "" : ", ") + std::to_string(g.index);
      continue;
    }
    ++registered;
  }
  if (registered == 0 && !inventory.gpus.empty()) {
    if (nvml->EventSetFree != nullptr) nvml->EventSetFree(set);
    return Status::Unimplemented("no GPU supports XID events (GPU " + skipped + ")");
  }
  return std::unique_ptr<HealthEventSource>(
      new NvmlHealthEventSource(std::move(nvml), inventory, set, std::move(clock)));
}

}  // namespace gpushare
