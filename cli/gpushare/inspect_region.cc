#include "cli/gpushare/inspect_region.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/unique_fd.h"
#include "interpose/region_layout.h"
#include "node/region_reader.h"

namespace gpushare::cli {
namespace {

namespace ip = gpushare::interpose;

std::string UuidText(const uint8_t b[16]) {
  char out[40];
  std::snprintf(out, sizeof out,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return out;
}

std::string Bytes(uint64_t n) {
  char buf[48];
  if (n >= (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(n) / (1 << 30));
  } else if (n >= (uint64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(n) / (1 << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%" PRIu64 " B", n);
  }
  return buf;
}

// The process's state as this PID namespace sees it.
const char* ProcessState(int32_t pid, uint64_t start_time) {
  switch (node::SlotProcessState(pid, start_time)) {
    case node::SlotProcess::kAlive:
      return "alive";
    case node::SlotProcess::kReused:
      return "reused";
    case node::SlotProcess::kDead:
      break;
  }
  return "dead";
}

}  // namespace

Result<RegionInfo> ReadRegionFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) return Status::InvalidArgument(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return Status::InvalidArgument(path + ": not a regular file");
  const uint64_t want = sizeof(ip::RegionFile);
  auto file = std::make_unique<ip::RegionFile>();
  char* dst = reinterpret_cast<char*>(file.get());
  size_t got = 0;
  while (got < want) {
    ssize_t n = ::pread(fd.get(), dst + got, want - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::InvalidArgument(path + ": read failed: " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  const ip::RegionHeader& h = file->header;
  if (got < sizeof(h.magic) || h.magic != ip::kRegionMagic) {
    return Status::InvalidArgument(
        path + ": not a gpushare accounting region (" +
        (got < sizeof(h.magic) ? std::to_string(got) + " bytes" : std::string("no region magic")) +
        ")");
  }
  if (got < offsetof(ip::RegionHeader, ready)) {
    return Status::InvalidArgument(path + ": truncated: " + std::to_string(got) +
                                   " bytes, a region has " + std::to_string(want));
  }
  if (h.layout_version != ip::kRegionLayoutVersion) {
    return Status::InvalidArgument(path + ": region layout version " +
                                   std::to_string(h.layout_version) + "; this gpushare reads " +
                                   std::to_string(ip::kRegionLayoutVersion));
  }
  if (h.header_size != sizeof(ip::RegionHeader) || h.file_size != want) {
    return Status::InvalidArgument(
        path + ": region layout version " + std::to_string(h.layout_version) +
        " but sizes differ (header " + std::to_string(h.header_size) + ", file " +
        std::to_string(h.file_size) + "; expected " + std::to_string(sizeof(ip::RegionHeader)) +
        ", " + std::to_string(want) + ")");
  }
  if (got < want) {
    return Status::InvalidArgument(path + ": truncated: " + std::to_string(got) +
                                   " bytes, a region has " + std::to_string(want));
  }
  RegionInfo info;
  info.layout_version = h.layout_version;
  info.file_size = h.file_size;
  info.ready = h.ready != 0;
  info.slot_high_water = h.slot_high_water;
  info.repairs = h.repairs;
  info.reclaimed_slots = h.reclaimed_slots;
  for (int i = 0; i < ip::kRegionDevices; ++i) {
    const ip::RegionDevice& d = file->devices[i];
    if (d.in_use == 0) continue;
    info.devices.push_back({i, UuidText(d.uuid), d.limited != 0, d.memory_limit, d.used, d.sm_limit,
                            d.oom_refusals, d.sm_bucket.admitted, d.sm_bucket.delayed});
  }
  const uint32_t high = std::min<uint32_t>(h.slot_high_water, ip::kMaxSlots);
  for (uint32_t s = 0; s < high; ++s) {
    const ip::RegionSlot& slot = file->slots[s];
    if (slot.pid == 0) continue;
    RegionProcessInfo p;
    p.slot = static_cast<int>(s);
    p.pid = slot.pid;
    p.start_time = slot.start_time;
    p.state = slot.pid > 0 ? ProcessState(slot.pid, slot.start_time) : "dead";
    for (const RegionDeviceInfo& d : info.devices) p.used.push_back(slot.used[d.index]);
    info.processes.push_back(std::move(p));
  }
  return info;
}

std::string FormatRegion(const std::string& path, const RegionInfo& r) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "region %s\nlayout version %u, %" PRIu64
                " bytes, %s; slot high-water %u, lock repairs %" PRIu64 ", reclaimed slots %" PRIu64
                "\n",
                path.c_str(), r.layout_version, r.file_size, r.ready ? "ready" : "NOT READY",
                r.slot_high_water, r.repairs, r.reclaimed_slots);
  out += line;
  out +=
      "\nDEVICE  UUID                                  LIMIT                 USED                  "
      "SM LIMIT  OOM REFUSALS  LAUNCHES  DELAYED\n";
  for (const RegionDeviceInfo& d : r.devices) {
    const std::string limit =
        d.limited ? std::to_string(d.memory_limit) + " (" + Bytes(d.memory_limit) + ")" : "none";
    const std::string used = std::to_string(d.used) + " (" + Bytes(d.used) + ")";
    const std::string sm = d.sm_limit == 0 ? "none" : std::to_string(d.sm_limit) + "%";
    std::snprintf(line, sizeof line,
                  "%-6d  %-36s  %-20s  %-20s  %-8s  %-12" PRIu64 "  %-8" PRIu64 "  %" PRIu64 "\n",
                  d.index, d.uuid.c_str(), limit.c_str(), used.c_str(), sm.c_str(), d.oom_refusals,
                  d.launches, d.delayed);
    out += line;
  }
  if (r.devices.empty()) out += "(no devices registered)\n";
  out += "\nSLOT  PID         START TIME    STATE   USED\n";
  for (const RegionProcessInfo& p : r.processes) {
    std::string used;
    for (size_t i = 0; i < p.used.size(); ++i) {
      used += (used.empty() ? "" : ", ") + std::string("dev") + std::to_string(r.devices[i].index) +
              "=" + std::to_string(p.used[i]);
    }
    std::snprintf(line, sizeof line, "%-4d  %-10d  %-12" PRIu64 "  %-6s  %s\n", p.slot, p.pid,
                  p.start_time, p.state.c_str(), used.empty() ? "-" : used.c_str());
    out += line;
  }
  if (r.processes.empty()) out += "(no processes)\n";
  out += "(liveness as seen from this PID namespace; run inside the container for its own view)\n";
  return out;
}

int RunInspectRegion(const std::string& path) {
  Result<RegionInfo> info = ReadRegionFile(path);
  if (!info.ok()) {
    std::fprintf(stderr, "gpushare inspect region: %s\n", info.status().message().c_str());
    return 2;
  }
  std::fputs(FormatRegion(path, *info).c_str(), stdout);
  return 0;
}

}  // namespace gpushare::cli
