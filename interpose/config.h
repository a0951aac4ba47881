// config.h: what libgpushare-cuda.so enforces, read from the config file or the environment.
//
// Two sources, never mixed:
//  1. The config file written by gpushare-node's Allocate and mounted read-only at
//     kConfigPath (/etc/gpushare/config). It survives `su`/`ssh` sessions that drop the
//     environment (HAMi#1090) and cannot be overridden by a user's environment. When that path
//     does not exist, GPUSHARE_CONFIG may name another file (tests, standalone use).
//  2. Otherwise the HAMi-core-compatible environment: CUDA_DEVICE_MEMORY_LIMIT[_<i>] (bytes or a
//     k/m/g suffix, 1024-based; 0 or empty = no limit), CUDA_DEVICE_SM_LIMIT[_<i>] (percent,
//     0 or 100 = no limit), CUDA_DEVICE_MEMORY_SHARED_CACHE (the shared region file),
//     GPU_CORE_UTILIZATION_POLICY=disable (turns the SM limiter off), LIBCUDA_LOG_LEVEL, plus
//     gpushare's GPUSHARE_* knobs (docs/interposer.md lists them all).
//
// File format: `key=value` lines, `#` comments. Keys: version, region, memory_limit, sm_limit,
// device.<i>.uuid, device.<i>.memory_limit, device.<i>.sm_limit, context_overhead,
// context_charge (measure|fixed),
// managed_memory (count|ignore), ipc_imports (ignore|count), external_memory (count|ignore),
// sm_limiter (on|off), log_level. A malformed limit never silently means "unlimited": the
// configuration becomes `fail_closed` (every allocation is refused, with an error naming the
// problem), because an unreadable limit must not turn into an over-commit.
//
// Parsing is pure (no I/O): the caller passes the file text and a getenv function.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace gpushare::interpose {

inline constexpr int kMaxDevices = 16;
inline constexpr const char* kConfigPath = "/etc/gpushare/config";
inline constexpr const char* kDefaultRegionPath = "/tmp/gpushare-cuda.region";
// Device memory charged for one CUDA context when the driver's own figure cannot be measured and
// nothing is configured (context_charge.h says when; CUDA 12/13 contexts measured 250-600 MiB).
inline constexpr uint64_t kDefaultContextOverhead = 300ull << 20;

enum class ManagedPolicy : uint8_t { kCount, kIgnore };
enum class ImportPolicy : uint8_t { kIgnore, kCount };

struct DeviceConfig {
  bool has_uuid = false;
  uint8_t uuid[16] = {};
  bool memory_set = false;    // memory_limit given for this index
  uint64_t memory_limit = 0;  // bytes; 0 with memory_set = no limit for this device
  bool sm_set = false;
  uint32_t sm_limit = 0;  // percent 1..99 limits; 0/100 = none
};

struct Config {
  enum Source : uint8_t { kNone, kEnvironment, kFile };
  Source source = kNone;
  bool fail_closed = false;  // a limit could not be read: refuse every allocation
  char problem[256] = {};    // why fail_closed is set (or the first warning)

  uint64_t default_memory_limit = 0;  // 0 = none
  uint32_t default_sm_limit = 0;      // 0 = none
  DeviceConfig devices[kMaxDevices];

  char region_path[512] = {};
  uint64_t context_overhead = kDefaultContextOverhead;
  bool context_overhead_set = false;  // configured: the override when nothing is measured
  bool context_charge_fixed = false;  // context_charge=fixed: never measure
  ManagedPolicy managed = ManagedPolicy::kCount;
  ImportPolicy ipc_imports = ImportPolicy::kIgnore;
  ImportPolicy external_memory = ImportPolicy::kCount;
  bool sm_limiter_enabled = true;
  int log_level = 2;

  // True when anything is to be enforced (a memory limit, an SM limit, or fail_closed).
  bool Active() const;
  bool AnySmLimit() const;
};

// The limits that apply to one device, identified by its index as this process sees it and, when
// known, its UUID. A config-file device entry with a UUID matches by UUID only; entries without a
// UUID (and the environment's _<i>) match by index.
struct DeviceLimits {
  bool memory_limited = false;
  uint64_t memory_limit = 0;
  uint32_t sm_limit = 0;  // 0 = none
};
DeviceLimits LimitsFor(const Config& config, int index, const uint8_t* uuid /* nullable */);

using GetenvFn = const char* (*)(const char* name);

// Parses a config file's text into *config (source = kFile). Never fails: problems set
// fail_closed (for limits) or are noted in `problem` (unknown keys are ignored).
void ParseConfigText(const char* text, size_t len, Config* config);

// Fills *config from the environment (source = kEnvironment when any limit variable is set).
void ParseEnvironment(GetenvFn getenv_fn, Config* config);

// Parses an SM limit percentage: "0".."100". False otherwise.
bool ParsePercent(const char* s, size_t len, uint32_t* out);

}  // namespace gpushare::interpose
