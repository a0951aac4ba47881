// region_layout.h: the bytes of the per-container accounting region, and nothing else.
//
// Two parties read this layout: libgpushare-cuda.so (interpose/region.h: it creates, locks and
// writes the file) and gpushare-node (node/region_reader.h: it only reads, for /metrics, and
// never takes the region's lock). The header is therefore self-contained (C standard headers and
// pthread.h only, no function, no state) so that the node agent can include it without taking
// any of the interposer's code; it is the one interpose/ header other layers may include
// (tests/core/layering_test.cc).
//
// Compatibility rules (what lets the reader handle files of every library version):
//  * magic, layout_version, header_size and file_size identify a layout; a reader skips a file
//    whose four do not match what it knows, never guesses.
//  * A field may be taken from `reserved` without a version bump when 0 (what the initialiser's
//    memset leaves, and what every older writer leaves) means "not known": old readers ignore it,
//    new readers treat 0 as absent. Anything else changes kRegionLayoutVersion.
#pragma once

#include <pthread.h>
#include <stdint.h>

namespace gpushare::interpose {

inline constexpr uint64_t kRegionMagic = 0x314745525348534bull;  // "KSHSREG1"
inline constexpr uint32_t kRegionLayoutVersion = 1;
inline constexpr int kMaxSlots = 1024;
inline constexpr int kRegionDevices = 16;  // == interpose/config.h kMaxDevices

// Shared (per device, in the region) SM gate state (sm_limiter.h). All fields are updated with
// atomics.
struct SmBucket {
  int64_t tat_ns;      // theoretical arrival time, CLOCK_MONOTONIC ns
  uint64_t admitted;   // launches admitted
  uint64_t delayed;    // launches that had to wait
  uint64_t waited_ns;  // total wait
};

// Where a context's charge came from (interpose/context_charge.h says when each applies):
// RegionDevice::context_charge_source. Stored in the file: never renumber.
enum class ChargeSource : uint32_t {
  kNone = 0,      // no context charged yet (or a library older than the field)
  kMeasured = 1,  // this context, measured around its creation
  kEarlier = 2,   // an earlier measurement on the same device in this container
  kOverride = 3,  // the configured context_overhead (the driver reported nothing usable)
  kFixed = 4,     // context_charge=fixed: the configured figure, never measured
  kDefault = 5,   // nothing measured, nothing configured: the built-in estimate
};
inline constexpr int kChargeSourceCount = 6;
// The metrics label of each (index = value).
inline constexpr const char* kChargeSourceNames[kChargeSourceCount] = {
    "none", "measured", "earlier", "override", "fixed", "default"};

struct RegionDevice {
  uint8_t uuid[16];
  uint32_t in_use;        // registered
  uint32_t limited;       // memory_limit applies
  uint64_t memory_limit;  // bytes
  uint64_t used;          // sum of the live slots' used[] for this device
  uint32_t sm_limit;      // percent, 0 = none
  uint32_t reserved0;
  SmBucket sm_bucket;     // shared SM limiter state
  uint64_t oom_refusals;  // statistics
  // Wall-clock time (CLOCK_REALTIME, whole seconds since the epoch) of the latest kernel or
  // graph launch any process of the container made on this device, 0 = none seen (or a library
  // older than the field). Written lock-free (relaxed store), at most once a second per thread
  // (hooks_launch.cc), so it lags the real last launch by up to a second. Was reserved[0].
  uint64_t last_launch_s;
  // What the latest CUDA context any process of the container created on this device was
  // charged (bytes) and where that figure came from (ChargeSource above); 0 = no context yet
  // (or a library older than the fields). Relaxed stores. Were reserved[0..1].
  uint64_t context_charge;
  uint64_t context_charge_source;
  // The latest believable measurement of a context's cost on this device (bytes, 0 = none): the
  // figure a later context falls back to when its own reading is disturbed. Was reserved[2].
  uint64_t context_measured;
  uint64_t reserved[1];
};

struct RegionSlot {
  int32_t pid;  // 0 = free
  uint32_t reserved0;
  uint64_t start_time;  // /proc/<pid>/stat field 22, 0 = unknown
  uint64_t used[kRegionDevices];
};

struct RegionHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t header_size;  // sizeof(RegionHeader)
  uint64_t file_size;    // sizeof(RegionFile)
  uint32_t ready;        // set last by the initialiser (release)
  uint32_t slot_high_water;
  uint64_t repairs;  // times a dead lock owner was recovered from
  uint64_t reclaimed_slots;
  union {
    pthread_mutex_t mutex;
    char mutex_storage[64];
  };
  uint64_t reserved[8];
};

struct RegionFile {
  RegionHeader header;
  RegionDevice devices[kRegionDevices];
  RegionSlot slots[kMaxSlots];
};

// The layout of version 1 as released: a field taken from `reserved` must keep these.
static_assert(sizeof(SmBucket) == 32, "SmBucket layout changed");
static_assert(sizeof(RegionDevice) == 128, "RegionDevice layout changed");
static_assert(sizeof(RegionSlot) == 16 + 8 * kRegionDevices, "RegionSlot layout changed");
static_assert(sizeof(RegionHeader) == 48 + 64 + 64, "RegionHeader layout changed");

}  // namespace gpushare::interpose
