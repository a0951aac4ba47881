// See region.h.
#include "interpose/region.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interpose/base.h"
#include "interpose/log.h"
#include "interpose/region_init.h"

namespace gpushare::interpose {

static_assert(sizeof(pthread_mutex_t) <= 64, "mutex storage too small");
static_assert(sizeof(RegionFile) < (4u << 20), "region file unexpectedly large");

void (*Region::test_hook_in_critical_section)(void) = nullptr;

namespace {

constexpr uint64_t kReclaimIntervalNs = 100'000'000;  // periodic sweep on the allocation path

// Reads /proc/<pid>/stat; returns false if it cannot be read. state and start are fields 3, 22.
bool ReadProcStat(int32_t pid, char* state, uint64_t* start, bool* missing) {
  char path[48];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  *missing = false;
  if (fd < 0) {
    *missing = (errno == ENOENT || errno == ESRCH);
    return false;
  }
  char buf[1024];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof(buf) - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // The command name (field 2) may contain spaces and ')': fields resume after the last ')'.
  char* p = nullptr;
  for (char* q = buf; *q != '\0'; ++q)
    if (*q == ')') p = q;
  if (p == nullptr || p[1] != ' ') return false;
  p += 2;
  *state = *p;
  int field = 3;
  while (*p != '\0' && field < 22) {
    if (*p == ' ') ++field;
    ++p;
  }
  if (field != 22) return false;
  size_t len = 0;
  while (p[len] >= '0' && p[len] <= '9') ++len;
  return ParseU64(p, len, start);
}

}  // namespace

uint64_t ProcStartTime(int32_t pid) {
  char state = 0;
  uint64_t start = 0;
  bool missing = false;
  return ReadProcStat(pid, &state, &start, &missing) ? start : 0;
}

bool ProcAlive(int32_t pid, uint64_t start_time) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char state = 0;
  uint64_t start = 0;
  bool missing = false;
  if (!ReadProcStat(pid, &state, &start, &missing)) {
    // Unreadable /proc (hidepid, no /proc mounted): trust kill(2), which said it exists.
    return !missing;
  }
  if (state == 'Z' || state == 'X' || state == 'x') return false;  // exited; memory is freed
  if (start_time != 0 && start != start_time) return false;        // PID reused
  return true;
}

bool Region::IsAlive(int32_t pid, uint64_t start_time) const {
  return probe_.alive != nullptr ? probe_.alive(pid, start_time) : ProcAlive(pid, start_time);
}

namespace {

bool Valid(const RegionFile* f) {
  return LoadAcquire(&f->header.ready) == 1 && f->header.magic == kRegionMagic &&
         f->header.layout_version == kRegionLayoutVersion &&
         f->header.header_size == sizeof(RegionHeader) && f->header.file_size == sizeof(RegionFile);
}

int FlockRetry(int fd, int op) {
  int r;
  do {
    r = flock(fd, op);
  } while (r != 0 && errno == EINTR);
  return r;
}

}  // namespace

bool Region::Attach(const char* path, char* err, size_t err_len) {
  const size_t size = sizeof(RegionFile);
  for (int attempt = 0; attempt < 5; ++attempt) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0) {
      snprintf(err, err_len, "cannot open region file %s: %s", path, strerror(errno));
      return false;
    }
    (void)fchmod(fd, 0666);  // every user of the container shares it; fails harmlessly if not ours
    bool exclusive = FlockRetry(fd, LOCK_EX | LOCK_NB) == 0;
    bool have_flock = exclusive;
    if (!exclusive && errno == EWOULDBLOCK) have_flock = FlockRetry(fd, LOCK_SH) == 0;
    off_t cur = lseek(fd, 0, SEEK_END);
    // Alone (exclusive flock granted): nobody has it mapped, so it is always reinitialised in
    // place. Without flock support, only a file of the wrong size is.
    bool reinit = exclusive || (!have_flock && cur != static_cast<off_t>(size));
    if (reinit && cur != static_cast<off_t>(size) && ftruncate(fd, static_cast<off_t>(size)) != 0) {
      snprintf(err, err_len, "cannot size region file %s: %s", path, strerror(errno));
      close(fd);
      return false;
    }
    if (!reinit && cur != static_cast<off_t>(size)) {
      snprintf(err, err_len,
               "region file %s is in use with an unknown layout (%lld bytes, this library uses "
               "%zu); refusing to reinterpret it until its processes exit",
               path, static_cast<long long>(cur), size);
      close(fd);
      return false;
    }
    void* m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      snprintf(err, err_len, "cannot map region file %s: %s", path, strerror(errno));
      close(fd);
      return false;
    }
    RegionFile* f = static_cast<RegionFile*>(m);
    if (reinit) {
      InitialiseRegionFile(f);
      // Keep a shared hold for our lifetime. The conversion is not atomic: a process that takes
      // the exclusive lock in between reinitialises again before we can use the file, which is
      // harmless because nothing of ours is in it yet and our LOCK_SH waits for its init.
      if (exclusive) FlockRetry(fd, LOCK_SH);
      if (!have_flock)
        Log(kLogWarn, "msg=\"flock unavailable on region file; initialised without it\" path=%s",
            path);
    } else if (!Valid(f)) {
      bool never_ready = LoadAcquire(&f->header.ready) == 0;
      munmap(m, size);
      close(fd);
      if (never_ready || attempt < 4) continue;  // the initialiser died before finishing: retry
      snprintf(err, err_len, "region file %s is in use with an unknown layout version", path);
      return false;
    }
    file_ = f;
    fd_ = fd;
    return true;
  }
  snprintf(err, err_len, "region file %s never became ready", path);
  return false;
}

void Region::AttachMemory(RegionFile* file, bool initialise) {
  if (initialise) InitialiseRegionFile(file);
  file_ = file;
  fd_ = -1;
}

void Region::Detach() {
  if (file_ != nullptr && fd_ >= 0) munmap(file_, sizeof(RegionFile));
  if (fd_ >= 0) close(fd_);
  file_ = nullptr;
  fd_ = -1;
}

bool Region::Lock() {
  int r = pthread_mutex_lock(&file_->header.mutex);
  if (r == 0) return true;
  if (r == EOWNERDEAD) {
    // The previous owner died inside the critical section. Mark the mutex usable at once (so a
    // crash during the repair cannot make it unrecoverable), then repair.
    pthread_mutex_consistent(&file_->header.mutex);
    FetchAdd(&file_->header.repairs, uint64_t{1});
    RepairLocked();
    return true;
  }
  Log(kLogError, "msg=\"region lock unusable\" errno=%d", r);
  return false;
}

void Region::Unlock() {
  pthread_mutex_unlock(&file_->header.mutex);
}

void Region::ReclaimSlotLocked(int s) {
  RegionSlot& slot = file_->slots[s];
  for (int d = 0; d < kMaxDevices; ++d) {
    uint64_t u = slot.used[d];
    if (u != 0) {
      StoreRelaxed(&file_->devices[d].used, SatSub(file_->devices[d].used, u));
      StoreRelaxed(&slot.used[d], uint64_t{0});
    }
  }
  slot.start_time = 0;
  StoreRelease(&slot.pid, int32_t{0});
  FetchAdd(&file_->header.reclaimed_slots, uint64_t{1});
}

void Region::RepairLocked() {
  uint32_t hw = file_->header.slot_high_water;
  if (hw > static_cast<uint32_t>(kMaxSlots)) hw = kMaxSlots;
  for (uint32_t s = 0; s < hw; ++s) {
    RegionSlot& slot = file_->slots[s];
    if (slot.pid != 0 && !IsAlive(slot.pid, slot.start_time))
      ReclaimSlotLocked(static_cast<int>(s));
  }
  for (int d = 0; d < kMaxDevices; ++d) {
    uint64_t total = 0;
    for (uint32_t s = 0; s < hw; ++s)
      if (file_->slots[s].pid != 0) total = SatAdd(total, file_->slots[s].used[d]);
    StoreRelaxed(&file_->devices[d].used, total);
  }
  Log(kLogWarn, "msg=\"recovered the region lock from a process that died holding it\"");
}

int Region::RegisterProcess(int32_t pid, uint64_t start_time) {
  if (file_ == nullptr) return -1;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!Lock()) return -1;
    int chosen = -1;
    uint32_t hw = file_->header.slot_high_water;
    for (uint32_t s = 0; s < hw && s < static_cast<uint32_t>(kMaxSlots); ++s) {
      RegionSlot& slot = file_->slots[s];
      if (slot.pid == pid) ReclaimSlotLocked(static_cast<int>(s));  // stale: pre-exec or reused
      if (slot.pid == 0 && chosen < 0) chosen = static_cast<int>(s);
    }
    if (chosen < 0 && hw < static_cast<uint32_t>(kMaxSlots)) {
      chosen = static_cast<int>(hw);
      StoreRelease(&file_->header.slot_high_water, hw + 1);
    }
    if (chosen >= 0) {
      RegionSlot& slot = file_->slots[chosen];
      for (int d = 0; d < kMaxDevices; ++d) slot.used[d] = 0;
      slot.start_time = start_time;
      StoreRelease(&slot.pid, pid);
      if (probe_.alive == nullptr) {
        self_pid_ = pid;
        self_start_ = start_time;
      }
    }
    Unlock();
    if (chosen >= 0) return chosen;
    if (ReclaimDead() == 0) break;
  }
  return -1;
}

void Region::UnregisterProcess(int slot) {
  if (file_ == nullptr || slot < 0 || slot >= kMaxSlots) return;
  if (!Lock()) return;
  ReclaimSlotLocked(slot);
  Unlock();
}

int Region::FindDevice(const uint8_t uuid[16]) {
  if (file_ == nullptr) return -1;
  for (int d = 0; d < kMaxDevices; ++d) {
    RegionDevice& dev = file_->devices[d];
    if (LoadAcquire(&dev.in_use) == 1 && UuidEq(dev.uuid, uuid)) return d;
  }
  return -1;
}

int Region::FindOrAddDevice(const uint8_t uuid[16], const DeviceLimits& limits) {
  int found = FindDevice(uuid);
  if (found >= 0 || file_ == nullptr) return found;
  if (!Lock()) return -1;
  int result = -1;
  for (int d = 0; d < kMaxDevices && result < 0; ++d)
    if (file_->devices[d].in_use == 1 && UuidEq(file_->devices[d].uuid, uuid)) result = d;
  for (int d = 0; d < kMaxDevices && result < 0; ++d) {
    RegionDevice& dev = file_->devices[d];
    if (dev.in_use != 0) continue;
    memcpy(dev.uuid, uuid, 16);
    dev.limited = limits.memory_limited ? 1 : 0;
    dev.memory_limit = limits.memory_limit;
    dev.sm_limit = limits.sm_limit;
    dev.used = 0;
    StoreRelease(&dev.in_use, uint32_t{1});
    result = d;
  }
  Unlock();
  return result;
}

ReserveResult Region::Reserve(int slot, int dev, uint64_t bytes) {
  if (file_ == nullptr || slot < 0 || dev < 0) return ReserveResult::kNoRegion;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!Lock()) return ReserveResult::kNoRegion;
    if (test_hook_in_critical_section != nullptr) test_hook_in_critical_section();
    RegionDevice& d = file_->devices[dev];
    if (d.limited == 0 || bytes <= SatSub(d.memory_limit, d.used)) {
      StoreRelaxed(&d.used, SatAdd(d.used, bytes));
      StoreRelaxed(&file_->slots[slot].used[dev], SatAdd(file_->slots[slot].used[dev], bytes));
      Unlock();
      return ReserveResult::kOk;
    }
    Unlock();
    if (attempt == 0 && ReclaimDead() == 0) break;
  }
  FetchAdd(&file_->devices[dev].oom_refusals, uint64_t{1});
  return ReserveResult::kOverLimit;
}

void Region::Charge(int slot, int dev, uint64_t bytes) {
  if (file_ == nullptr || slot < 0 || dev < 0 || bytes == 0) return;
  if (!Lock()) return;
  RegionDevice& d = file_->devices[dev];
  StoreRelaxed(&d.used, SatAdd(d.used, bytes));
  StoreRelaxed(&file_->slots[slot].used[dev], SatAdd(file_->slots[slot].used[dev], bytes));
  Unlock();
}

void Region::Release(int slot, int dev, uint64_t bytes) {
  if (file_ == nullptr || slot < 0 || dev < 0 || bytes == 0) return;
  if (!Lock()) return;
  uint64_t& mine = file_->slots[slot].used[dev];
  uint64_t removed = Min(bytes, mine);
  StoreRelaxed(&mine, mine - removed);
  RegionDevice& d = file_->devices[dev];
  StoreRelaxed(&d.used, SatSub(d.used, removed));
  Unlock();
  if (removed != bytes)
    Log(kLogDebug, "msg=\"release larger than the charge\" dev=%d bytes=%llu charged=%llu", dev,
        static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(removed));
}

uint64_t Region::UsedNoReclaim(int dev) const {
  if (file_ == nullptr || dev < 0) return 0;
  return LoadRelaxed(&file_->devices[dev].used);
}

uint64_t Region::Used(int dev) {
  ReclaimDead();
  return UsedNoReclaim(dev);
}

uint64_t Region::SlotUsed(int slot, int dev) const {
  if (file_ == nullptr || slot < 0 || dev < 0) return 0;
  return LoadRelaxed(&file_->slots[slot].used[dev]);
}

int Region::ReclaimDead() {
  if (file_ == nullptr) return 0;
  struct Candidate {
    int slot;
    int32_t pid;
    uint64_t start;
  };
  Candidate dead[64];
  int reclaimed = 0;
  uint32_t hw = LoadAcquire(&file_->header.slot_high_water);
  if (hw > static_cast<uint32_t>(kMaxSlots)) hw = kMaxSlots;
  uint32_t s = 0;
  while (s < hw) {
    int n = 0;
    // Probe outside the lock; collect up to 64 dead owners per batch.
    for (; s < hw && n < 64; ++s) {
      int32_t pid = LoadAcquire(&file_->slots[s].pid);
      if (pid == 0) continue;
      uint64_t start = LoadRelaxed(&file_->slots[s].start_time);
      if (pid == self_pid_ && start == self_start_) continue;
      if (!IsAlive(pid, start)) dead[n++] = Candidate{static_cast<int>(s), pid, start};
    }
    if (n == 0) continue;
    if (!Lock()) return reclaimed;
    for (int i = 0; i < n; ++i) {
      RegionSlot& slot = file_->slots[dead[i].slot];
      if (slot.pid == dead[i].pid && slot.start_time == dead[i].start) {
        ReclaimSlotLocked(dead[i].slot);
        ++reclaimed;
      }
    }
    Unlock();
  }
  if (reclaimed > 0)
    Log(kLogInfo, "msg=\"reclaimed the usage of exited processes\" slots=%d", reclaimed);
  return reclaimed;
}

void Region::MaybeReclaim(uint64_t now_ns) {
  uint64_t last = LoadRelaxed(&last_reclaim_ns_);
  if (now_ns - last < kReclaimIntervalNs && last != 0) return;
  if (!CasStrong(&last_reclaim_ns_, &last, now_ns)) return;
  ReclaimDead();
}

}  // namespace gpushare::interpose
