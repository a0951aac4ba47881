// See region_reader.h.
#include "node/region_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "base/unique_fd.h"
#include "interpose/region_layout.h"

namespace gpushare::node {

namespace ir = gpushare::interpose;

namespace {

// What is read: the header and the device table (one pread), then the slots up to the
// high-water mark (a second one).
constexpr size_t kHeadBytes = offsetof(ir::RegionFile, slots);

bool PreadAll(int fd, void* buf, size_t len, off_t off) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = ::pread(fd, p, len, off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
    off += n;
  }
  return true;
}

uint64_t Clamp(uint64_t v) {
  return v > kMaxPlausibleBytes ? kMaxPlausibleBytes : v;
}

std::string Hex(const uint8_t u[16]) {
  static const char* hex = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[2 * i] = hex[u[i] >> 4];
    s[2 * i + 1] = hex[u[i] & 15];
  }
  return s;
}

bool ReadProcStat(int32_t pid, char* state, uint64_t* start, bool* missing) {
  *missing = false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) {
    *missing = true;
    return false;
  }
  std::string line;
  std::getline(in, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return false;
    if (i == 3) *state = field.empty() ? '?' : field[0];
  }
  char* end = nullptr;
  *start = std::strtoull(field.c_str(), &end, 10);
  return end != nullptr && *end == '\0';
}

}  // namespace

const char* RegionSkipName(RegionSkip s) {
  switch (s) {
    case RegionSkip::kNone:
      return "none";
    case RegionSkip::kMissing:
      return "missing";
    case RegionSkip::kNotRegular:
      return "not_regular";
    case RegionSkip::kTruncated:
      return "truncated";
    case RegionSkip::kUnknownLayout:
      return "unknown_layout";
    case RegionSkip::kNotReady:
      return "not_ready";
    case RegionSkip::kIo:
      return "io_error";
  }
  return "unknown";
}

std::string UuidHex(const std::string& uuid) {
  std::string_view v = uuid;
  if (v.starts_with("GPU-") || v.starts_with("MIG-")) v.remove_prefix(4);
  std::string out;
  for (char c : v) {
    if (c == '-') continue;
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return "";
    out.push_back(c);
  }
  return out.size() == 32 ? out : "";
}

bool ReadFlockedFiles(std::set<FileKey>* out, const std::string& path) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    // "1: FLOCK  ADVISORY  READ  1234 fd:01:5678 0 EOF"; waiters are "1: -> FLOCK ...".
    std::istringstream f(line);
    std::string id, type, mode, access, pid, where;
    if (!(f >> id >> type)) continue;
    if (type == "->" && !(f >> type)) continue;
    if (type != "FLOCK" || !(f >> mode >> access >> pid >> where)) continue;
    unsigned maj = 0, min = 0;
    unsigned long long ino = 0;
    if (std::sscanf(where.c_str(), "%x:%x:%llu", &maj, &min, &ino) != 3) continue;
    out->insert({maj, min, ino});
  }
  return true;
}

bool InInitialPidNamespace() {
  char buf[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", buf, sizeof(buf) - 1);
  // PROC_PID_INIT_INO: the initial PID namespace's inode number, a kernel constant.
  return n > 0 && std::string(buf, static_cast<size_t>(n)) == "pid:[4026531836]";
}

SlotProcess SlotProcessState(int32_t pid, uint64_t start_time) {
  if (pid <= 0) return SlotProcess::kDead;
  char state = 0;
  uint64_t start = 0;
  bool missing = false;
  if (!ReadProcStat(pid, &state, &start, &missing)) return SlotProcess::kDead;
  if (state == 'Z' || state == 'X' || state == 'x') return SlotProcess::kDead;
  return start_time == 0 || start == start_time ? SlotProcess::kAlive : SlotProcess::kReused;
}

bool ProcessAlive(int32_t pid, uint64_t start_time) {
  return SlotProcessState(pid, start_time) == SlotProcess::kAlive;
}

RegionReading ReadRegion(const std::string& path, const RegionReaderOptions& options,
                         RegionSkip* skip) {
  *skip = RegionSkip::kNone;
  RegionReading r;
  // O_NONBLOCK: a FIFO planted in the directory must not block the scrape.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  if (!fd) {
    *skip = errno == ENOENT ? RegionSkip::kMissing : RegionSkip::kIo;
    return r;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    *skip = RegionSkip::kIo;
    return r;
  }
  if (!S_ISREG(st.st_mode)) {
    *skip = RegionSkip::kNotRegular;
    return r;
  }
  if (st.st_size < static_cast<off_t>(sizeof(ir::RegionHeader))) {
    *skip = RegionSkip::kTruncated;
    return r;
  }
  // The head (header + device table), twice, until two copies agree.
  auto a = std::make_unique<char[]>(kHeadBytes);
  auto b = std::make_unique<char[]>(kHeadBytes);
  ir::RegionHeader h{};
  if (!PreadAll(fd.get(), &h, sizeof(h), 0)) {
    *skip = RegionSkip::kTruncated;
    return r;
  }
  if (h.magic != ir::kRegionMagic || h.layout_version != ir::kRegionLayoutVersion ||
      h.header_size != sizeof(ir::RegionHeader) || h.file_size != sizeof(ir::RegionFile)) {
    *skip = RegionSkip::kUnknownLayout;
    return r;
  }
  if (st.st_size < static_cast<off_t>(sizeof(ir::RegionFile))) {
    *skip = RegionSkip::kTruncated;
    return r;
  }
  if (h.ready != 1) {
    *skip = RegionSkip::kNotReady;
    return r;
  }
  bool agreed = false;
  for (int attempt = 0; attempt < 3 && !agreed; ++attempt) {
    if (!PreadAll(fd.get(), a.get(), kHeadBytes, 0) ||
        !PreadAll(fd.get(), b.get(), kHeadBytes, 0)) {
      *skip = RegionSkip::kTruncated;  // shrunk meanwhile
      return r;
    }
    // The mutex bytes change with every lock: compare everything but them.
    const size_t mu = offsetof(ir::RegionHeader, mutex_storage);
    const size_t mu_end = mu + sizeof(h.mutex_storage);
    agreed = std::memcmp(a.get(), b.get(), mu) == 0 &&
             std::memcmp(a.get() + mu_end, b.get() + mu_end, kHeadBytes - mu_end) == 0;
  }
  r.torn = !agreed;
  ir::RegionHeader head;
  std::memcpy(&head, b.get(), sizeof(head));
  ir::RegionDevice devs[ir::kRegionDevices];
  std::memcpy(devs, b.get() + offsetof(ir::RegionFile, devices), sizeof(devs));
  if (head.magic != ir::kRegionMagic || head.layout_version != ir::kRegionLayoutVersion) {
    *skip = RegionSkip::kUnknownLayout;  // reinitialised to something else meanwhile
    return r;
  }

  // Liveness: the flock every attached process holds, else the slots' (pid, start time).
  const FileKey key{major(st.st_dev), minor(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  const uint32_t high = head.slot_high_water > static_cast<uint32_t>(ir::kMaxSlots)
                            ? static_cast<uint32_t>(ir::kMaxSlots)
                            : head.slot_high_water;
  std::vector<ir::RegionSlot> slots(high);
  if (high > 0 && !PreadAll(fd.get(), slots.data(), sizeof(ir::RegionSlot) * high,
                            static_cast<off_t>(offsetof(ir::RegionFile, slots)))) {
    *skip = RegionSkip::kTruncated;
    return r;
  }
  const auto alive = options.process_alive ? options.process_alive : ProcessAlive;
  uint64_t used_by_live[ir::kRegionDevices] = {};
  int held = 0, probed_alive = 0;
  for (const ir::RegionSlot& s : slots) {
    if (s.pid <= 0) continue;
    ++held;
    if (!alive(s.pid, s.start_time)) continue;
    ++probed_alive;
    for (int d = 0; d < ir::kRegionDevices; ++d)
      used_by_live[d] = Clamp(used_by_live[d] + Clamp(s.used[d]));
  }
  const bool flock_seen = options.locks_known && options.flocked.count(key) > 0;
  // Totals as the interposer keeps them (flock seen, or nothing known), or recomputed from the
  // processes seen alive (the same namespace), or nothing (dead).
  enum { kTotals, kProbed, kDead } use = kTotals;
  if (flock_seen) {
    r.live = true;
    r.processes = held;
  } else if (probed_alive > 0) {
    r.live = true;
    r.processes = probed_alive;
    use = kProbed;
  } else if (options.locks_known && options.locks_complete) {
    r.live = false;
    use = kDead;
  } else if (options.pids_comparable) {
    r.live = false;  // the slots' processes are in our PID namespace, and all are gone
    use = kDead;
  } else {
    r.liveness_known = false;
    r.live = held > 0;
    r.processes = held;
  }
  for (int d = 0; d < ir::kRegionDevices; ++d) {
    const ir::RegionDevice& dev = devs[d];
    if (dev.in_use != 1) continue;
    RegionDeviceReading x;
    x.uuid_hex = Hex(dev.uuid);
    x.memory_limited = dev.limited != 0;
    x.memory_limit = Clamp(dev.memory_limit);
    // The device total is what the interposer enforces with; with the slots known dead (pid
    // probe) it is recomputed from the live ones, as the interposer's repair would.
    x.used = use == kDead ? 0 : use == kProbed ? used_by_live[d] : Clamp(dev.used);
    x.sm_limit = dev.sm_limit > 100 ? 100 : dev.sm_limit;
    x.last_launch_s = dev.last_launch_s;
    x.oom_refusals = dev.oom_refusals;
    // A source this reader does not know (a newer library) is not guessed at.
    const uint64_t source = dev.context_charge_source;
    const bool known = source > 0 && source < ir::kChargeSourceCount;
    x.context_charge_source = ir::kChargeSourceNames[known ? source : 0];
    x.context_charge = known ? Clamp(dev.context_charge) : 0;
    r.devices.push_back(std::move(x));
  }
  return r;
}

}  // namespace gpushare::node
