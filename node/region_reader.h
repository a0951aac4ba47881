// RegionReader: gpushare-node's read-only view of the per-container accounting regions that
// libgpushare-cuda.so writes (layout: interpose/region_layout.h), for /metrics.
//
// The rule is that a scrape never blocks or slows a container:
//   * the file is opened O_RDONLY and read with pread (never mmap'd: a file truncated while
//     mapped would raise SIGBUS in the agent), the region's process-shared mutex is never
//     taken, nothing is ever written;
//   * the interposer updates the fields the reader uses with single aligned 8-byte stores, so a
//     field is never torn, but a set of fields may be (a process allocating meanwhile). The reader
//     reads the part it needs twice and accepts two equal copies; after three unequal pairs it
//     takes the last copy (the numbers of a busy container are a moment old either way);
//   * everything is validated and clamped: magic, layout version, header and file size (an
//     unknown layout is skipped and counted, never reinterpreted), the file's length (a
//     truncated or growing file is skipped), `ready`, the slot high-water mark, bytes (at most
//     kMaxPlausibleBytes);
//   * liveness: a region whose processes are all gone is reported with no usage. The interposer
//     decides liveness by (pid, start time), but a container's PIDs are those of its own PID
//     namespace, which gpushare-node does not share. What the node can see is the shared flock
//     every attached process holds on the file for its lifetime (region.h), listed in
//     /proc/locks, but only for lock owners visible in the agent's PID namespace. So, in order:
//     a FLOCK listed on the file's inode: live; a slot whose (pid, start time) is alive in the
//     agent's /proc (shared namespace, as in tests): live; neither, and the agent is in the host
//     PID namespace (it sees every lock: `locks_complete`) or shares the containers' PID
//     namespace (`pids_comparable`): dead; neither otherwise: unknown,
//     and the interposer's own totals are reported as they are (it reclaims dead processes'
//     usage itself when a process next attaches).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/status.h"

namespace gpushare::node {

// Bytes above this are garbage, not usage (a torn or corrupt value): 1 PiB.
inline constexpr uint64_t kMaxPlausibleBytes = uint64_t{1} << 50;

struct RegionDeviceReading {
  std::string uuid_hex;  // the 32 hex digits of the GPU or MIG UUID (the region keeps no prefix)
  bool memory_limited = false;
  uint64_t memory_limit = 0;   // bytes
  uint64_t used = 0;           // bytes charged by the container's live processes
  uint32_t sm_limit = 0;       // percent, 0 = none
  uint64_t last_launch_s = 0;  // wall clock, seconds since the epoch; 0 = no launch recorded
  uint64_t oom_refusals = 0;
  // What the container's latest CUDA context on the device was charged, and the figure's source
  // (interpose/region_layout.h kChargeSourceNames: "measured", "earlier", "override", "fixed",
  // "default"); 0 and "none" before any context (or from a library older than the fields).
  uint64_t context_charge = 0;
  std::string context_charge_source = "none";
};

struct RegionReading {
  std::vector<RegionDeviceReading> devices;
  int processes = 0;  // slots held by processes (0 when the region is stale)
  bool live = true;   // false: no process holds the region any more (its usage is reported as 0)
  bool liveness_known = true;  // false: nothing visible said live or dead (totals as written)
  bool torn = false;           // no two equal copies were read (the last one is reported)
};

// Why a file was skipped, for the log line and the skipped-regions counter.
enum class RegionSkip { kNone, kMissing, kNotRegular, kTruncated, kUnknownLayout, kNotReady, kIo };
const char* RegionSkipName(RegionSkip s);

// (device major, device minor, inode) of a file.
using FileKey = std::tuple<uint32_t, uint32_t, uint64_t>;

struct RegionReaderOptions {
  // Files some process holds a flock on; nullopt-like: `locks_known` false = unknown.
  std::set<FileKey> flocked;
  bool locks_known = false;
  // /proc/locks lists every process's locks: the agent is in the host PID namespace.
  bool locks_complete = false;
  // Liveness of a slot's (pid, start time). Default: /proc, like the interposer (ProcessAlive
  // below). Its "alive" is always believed; its "dead" only with pids_comparable (the regions'
  // processes are in the agent's PID namespace: tests, shareProcessNamespace).
  std::function<bool(int32_t pid, uint64_t start_time)> process_alive;
  bool pids_comparable = false;
};

// Reads /proc/locks (or `path`): the files with a FLOCK held. False when it cannot be read.
bool ReadFlockedFiles(std::set<FileKey>* out, const std::string& path = "/proc/locks");

// True when this process is in the host's (initial) PID namespace.
bool InInitialPidNamespace();

// What this PID namespace's /proc says of a slot's process: gone or a zombie (kDead), another
// process under the same PID (start_time != 0 and /proc/<pid>/stat field 22 differs: kReused),
// or the process itself (kAlive).
enum class SlotProcess { kDead, kReused, kAlive };
SlotProcess SlotProcessState(int32_t pid, uint64_t start_time);

// The interposer's liveness rule: SlotProcessState(pid, start_time) is kAlive.
bool ProcessAlive(int32_t pid, uint64_t start_time);

// The 32 lowercase hex digits of a "GPU-..."/"MIG-..." UUID (prefix and dashes dropped), "" when
// it is not one: the key regions are matched to devices by.
std::string UuidHex(const std::string& uuid);

// Reads one region file. On a skip, *skip says why and the reading is empty.
RegionReading ReadRegion(const std::string& path, const RegionReaderOptions& options,
                         RegionSkip* skip);

}  // namespace gpushare::node
