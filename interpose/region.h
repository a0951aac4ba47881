// region.h: the per-container shared accounting region (one mmap'd file for all processes).
//
// Every process of a container that uses CUDA maps the same file (normally
// /var/lib/gpushare/region, in the per-container directory gpushare-node mounts). It holds, per
// GPU (keyed by UUID, never by an index: two processes may number the same GPU differently),
// the limit and the bytes charged, and, per process, a slot with that process's share. The rules:
//
//  * Reservation is atomic across processes: check-and-add happens under one robust,
//    process-shared mutex, so two processes can never both pass a check and over-commit
//    (HAMi-core PR #273). Callers reserve BEFORE calling the driver and release on failure.
//  * A process killed at any point neither blocks the others nor keeps its usage. The mutex is
//    PTHREAD_MUTEX_ROBUST: the next locker gets EOWNERDEAD, marks it consistent at once, and
//    repairs (reclaims dead slots, recomputes every device total from the live slots). Every
//    write under the lock touches only the writer's own slot, dead slots or the totals, so the
//    repair is complete wherever the owner died.
//  * Liveness is (PID, start time from /proc/<pid>/stat field 22): a reused PID is a different
//    process. Dead slots are reclaimed before any reservation is refused, on every query, and at
//    most every 100 ms on the allocation path; the probing happens outside the lock.
//  * Arithmetic saturates: a total never underflows, whatever a buggy or dead writer left.
//  * The file is versioned (magic, layout version, size). Each attached process holds a shared
//    flock on it for its lifetime; the first process to attach (exclusive flock granted) always
//    reinitialises it, which also clears stale files, old layouts and changed limits. A file in
//    an unknown layout that others still hold is refused (fail closed), never reinterpreted.
//
// The SM limiter's shared per-device state (sm_limiter.h) also lives here, updated lock-free,
// and so does the time of the last kernel launch per device (hooks_launch.cc). The layout itself
// is in region_layout.h, which the node agent's read-only reader (node/region_reader.h) shares.
#pragma once

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "interpose/config.h"
#include "interpose/region_layout.h"
#include "interpose/sm_limiter.h"

namespace gpushare::interpose {

static_assert(kRegionDevices == kMaxDevices, "the region's device table is the config's");

// Liveness of a slot's owner. The default reads /proc; tests inject their own.
struct ProcessProbe {
  // True when a process with this pid exists, is not a zombie, and (when start_time != 0) was
  // started at start_time.
  bool (*alive)(int32_t pid, uint64_t start_time) = nullptr;
};
bool ProcAlive(int32_t pid, uint64_t start_time);
// The start time of a process (field 22 of /proc/<pid>/stat), 0 if unreadable.
uint64_t ProcStartTime(int32_t pid);

enum class ReserveResult { kOk, kOverLimit, kNoRegion };

class Region {
 public:
  // Opens (creating if needed) and maps the region file. Returns false with a message in err.
  bool Attach(const char* path, char* err, size_t err_len);
  // Uses already-mapped memory (tests); no file, no flock.
  void AttachMemory(RegionFile* file, bool initialise);
  void Detach();
  bool attached() const { return file_ != nullptr; }
  RegionFile* file() { return file_; }
  void set_probe(ProcessProbe probe) { probe_ = probe; }

  // Claims a slot for (pid, start_time). Any other slot with the same pid is stale (a previous
  // image of this process before exec, or a dead process whose PID was reused) and is reclaimed.
  // Returns the slot index or -1 when all slots are held by live processes.
  int RegisterProcess(int32_t pid, uint64_t start_time);
  // Frees a slot (process exit); its usage is released.
  void UnregisterProcess(int slot);

  // Finds the device with this UUID or registers it with these limits. A device already
  // registered keeps the region's limits (the first process of the container set them; all
  // processes read the same config). Returns the device index or -1 when the table is full.
  int FindOrAddDevice(const uint8_t uuid[16], const DeviceLimits& limits);
  // Finds a device by UUID without registering it; -1 if absent.
  int FindDevice(const uint8_t uuid[16]);

  // Atomically checks used + bytes <= limit and charges `bytes` to slot and device. Before
  // refusing, dead processes are reclaimed and the check is retried once.
  ReserveResult Reserve(int slot, int dev, uint64_t bytes);
  // Charges without a limit check (context overhead, memory the driver already holds).
  void Charge(int slot, int dev, uint64_t bytes);
  // Releases bytes previously charged to slot (saturating).
  void Release(int slot, int dev, uint64_t bytes);

  // Container-wide usage of a device, after reclaiming dead processes.
  uint64_t Used(int dev);
  uint64_t UsedNoReclaim(int dev) const;
  // The slot's own charge.
  uint64_t SlotUsed(int slot, int dev) const;

  // Probes every slot owner but this process (outside the lock) and frees the dead ones.
  // Returns how many.
  int ReclaimDead();
  // ReclaimDead() at most every `interval_ns` of now_ns (the allocation path's periodic sweep).
  void MaybeReclaim(uint64_t now_ns);

  // Test hook: called with the lock held inside Reserve (parks a process there to be killed).
  static void (*test_hook_in_critical_section)(void);

 private:
  bool Lock();
  void Unlock();
  void RepairLocked();
  void ReclaimSlotLocked(int slot);
  bool IsAlive(int32_t pid, uint64_t start_time) const;

  RegionFile* file_ = nullptr;
  int fd_ = -1;
  int32_t self_pid_ = 0;  // the process that registered through this object: alive, not probed
  uint64_t self_start_ = 0;
  ProcessProbe probe_{};
  uint64_t last_reclaim_ns_ = 0;
};

}  // namespace gpushare::interpose
