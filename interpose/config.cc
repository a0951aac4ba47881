// See config.h.
#include "interpose/config.h"

#include <stdio.h>

#include "interpose/base.h"

namespace gpushare::interpose {
namespace {

void SetProblem(Config* c, bool fail_closed, const char* what, const char* key, const char* value,
                size_t vlen) {
  if (fail_closed) c->fail_closed = true;
  if (c->problem[0] != '\0' && !fail_closed) return;  // keep the first (or the fatal) one
  char v[96];
  CopyStr(v, sizeof(v), value, vlen);
  snprintf(c->problem, sizeof(c->problem), "%s: %s, got \"%s\"", key, what, v);
}

// Sets a memory limit from text; 0 or empty means "no limit" (HAMi semantics).
bool ApplySize(Config* c, const char* key, const char* v, size_t vlen, bool* set_flag,
               uint64_t* out) {
  uint64_t bytes = 0;
  size_t trimmed = vlen;
  while (trimmed > 0 && (v[trimmed - 1] == ' ' || v[trimmed - 1] == '\r')) --trimmed;
  if (trimmed == 0) {
    if (set_flag) *set_flag = true;
    *out = 0;
    return true;
  }
  if (!ParseSize(v, trimmed, &bytes)) {
    SetProblem(c, true, "not a size (bytes, or a number with a k/m/g suffix)", key, v, vlen);
    return false;
  }
  if (set_flag) *set_flag = true;
  *out = bytes;
  return true;
}

bool ApplyPercent(Config* c, const char* key, const char* v, size_t vlen, bool* set_flag,
                  uint32_t* out) {
  uint32_t pct = 0;
  if (vlen == 0) {
    if (set_flag) *set_flag = true;
    *out = 0;
    return true;
  }
  if (!ParsePercent(v, vlen, &pct)) {
    SetProblem(c, true, "not a percentage 0..100", key, v, vlen);
    return false;
  }
  if (set_flag) *set_flag = true;
  *out = pct >= 100 ? 0 : pct;
  return true;
}

// Handles "device.<i>.<field>" keys. Returns false if the key is not of that form.
bool ApplyDeviceKey(Config* c, const char* key, size_t klen, const char* v, size_t vlen) {
  if (klen < 8 || !StartsWith(key, "device.")) return false;
  size_t i = 7;
  size_t start = i;
  while (i < klen && key[i] >= '0' && key[i] <= '9') ++i;
  uint64_t index = 0;
  char k[96];
  CopyStr(k, sizeof(k), key, klen);
  if (!ParseU64(key + start, i - start, &index) || i >= klen || key[i] != '.') {
    SetProblem(c, false, "unknown key", k, v, vlen);
    return true;
  }
  if (index >= static_cast<uint64_t>(kMaxDevices)) {
    SetProblem(c, true, "device index must be below 16", k, v, vlen);
    return true;
  }
  DeviceConfig& d = c->devices[index];
  const char* field = key + i + 1;
  size_t flen = klen - i - 1;
  if (EqualsIgnoreCase(field, flen, "uuid")) {
    if (!ParseUuid(v, vlen, d.uuid)) {
      SetProblem(c, true, "not a GPU or MIG UUID", k, v, vlen);
    } else {
      d.has_uuid = true;
    }
  } else if (EqualsIgnoreCase(field, flen, "memory_limit")) {
    ApplySize(c, k, v, vlen, &d.memory_set, &d.memory_limit);
  } else if (EqualsIgnoreCase(field, flen, "sm_limit")) {
    ApplyPercent(c, k, v, vlen, &d.sm_set, &d.sm_limit);
  } else {
    SetProblem(c, false, "unknown key", k, v, vlen);
  }
  return true;
}

void ApplyKey(Config* c, const char* key, size_t klen, const char* v, size_t vlen) {
  char k[96];
  CopyStr(k, sizeof(k), key, klen);
  if (ApplyDeviceKey(c, key, klen, v, vlen)) return;
  if (EqualsIgnoreCase(key, klen, "version")) {
    uint64_t ver = 0;
    if (!ParseU64(v, vlen, &ver) || ver != 1)
      SetProblem(c, true, "only version 1 is known", k, v, vlen);
  } else if (EqualsIgnoreCase(key, klen, "region")) {
    if (vlen == 0 || v[0] != '/' || !CopyStr(c->region_path, sizeof(c->region_path), v, vlen))
      SetProblem(c, true, "must be an absolute path shorter than 512 bytes", k, v, vlen);
  } else if (EqualsIgnoreCase(key, klen, "memory_limit")) {
    ApplySize(c, k, v, vlen, nullptr, &c->default_memory_limit);
  } else if (EqualsIgnoreCase(key, klen, "sm_limit")) {
    ApplyPercent(c, k, v, vlen, nullptr, &c->default_sm_limit);
  } else if (EqualsIgnoreCase(key, klen, "context_overhead")) {
    ApplySize(c, k, v, vlen, &c->context_overhead_set, &c->context_overhead);
  } else if (EqualsIgnoreCase(key, klen, "context_charge")) {
    if (EqualsIgnoreCase(v, vlen, "measure"))
      c->context_charge_fixed = false;
    else if (EqualsIgnoreCase(v, vlen, "fixed"))
      c->context_charge_fixed = true;
    else
      SetProblem(c, false, "must be measure or fixed (kept measure)", k, v, vlen);
  } else if (EqualsIgnoreCase(key, klen, "managed_memory")) {
    if (EqualsIgnoreCase(v, vlen, "count"))
      c->managed = ManagedPolicy::kCount;
    else if (EqualsIgnoreCase(v, vlen, "ignore"))
      c->managed = ManagedPolicy::kIgnore;
    else
      SetProblem(c, false, "must be count or ignore (kept count)", k, v, vlen);
  } else if (EqualsIgnoreCase(key, klen, "ipc_imports") ||
             EqualsIgnoreCase(key, klen, "external_memory")) {
    ImportPolicy* p =
        EqualsIgnoreCase(key, klen, "ipc_imports") ? &c->ipc_imports : &c->external_memory;
    if (EqualsIgnoreCase(v, vlen, "count"))
      *p = ImportPolicy::kCount;
    else if (EqualsIgnoreCase(v, vlen, "ignore"))
      *p = ImportPolicy::kIgnore;
    else
      SetProblem(c, false, "must be count or ignore (kept the default)", k, v, vlen);
  } else if (EqualsIgnoreCase(key, klen, "sm_limiter")) {
    if (EqualsIgnoreCase(v, vlen, "on"))
      c->sm_limiter_enabled = true;
    else if (EqualsIgnoreCase(v, vlen, "off"))
      c->sm_limiter_enabled = false;
    else
      SetProblem(c, false, "must be on or off (kept on)", k, v, vlen);
  } else if (EqualsIgnoreCase(key, klen, "log_level")) {
    uint64_t lvl = 0;
    if (ParseU64(v, vlen, &lvl) && lvl <= 4)
      c->log_level = static_cast<int>(lvl);
    else
      SetProblem(c, false, "must be 0..4 (kept 2)", k, v, vlen);
  } else {
    SetProblem(c, false, "unknown key (ignored)", k, v, vlen);
  }
}

const char* Trim(const char* s, size_t* len) {
  while (*len > 0 && (*s == ' ' || *s == '\t')) {
    ++s;
    --*len;
  }
  while (*len > 0 && (s[*len - 1] == ' ' || s[*len - 1] == '\t' || s[*len - 1] == '\r')) --*len;
  return s;
}

}  // namespace

bool ParsePercent(const char* s, size_t len, uint32_t* out) {
  s = Trim(s, &len);
  uint64_t v = 0;
  if (len > 0 && s[len - 1] == '%') --len;
  if (!ParseU64(s, len, &v) || v > 100) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

bool Config::AnySmLimit() const {
  if (!sm_limiter_enabled) return false;
  if (default_sm_limit != 0) return true;
  for (const DeviceConfig& d : devices)
    if (d.sm_set && d.sm_limit != 0) return true;
  return false;
}

bool Config::Active() const {
  if (fail_closed) return true;
  if (default_memory_limit != 0 || AnySmLimit()) return true;
  for (const DeviceConfig& d : devices)
    if (d.memory_set && d.memory_limit != 0) return true;
  return false;
}

DeviceLimits LimitsFor(const Config& config, int index, const uint8_t* uuid) {
  DeviceLimits out;
  if (config.fail_closed) {
    out.memory_limited = true;
    out.memory_limit = 0;
    return out;
  }
  const DeviceConfig* match = nullptr;
  bool any_uuid = false;
  for (const DeviceConfig& d : config.devices) any_uuid = any_uuid || d.has_uuid;
  if (uuid != nullptr && any_uuid) {
    for (const DeviceConfig& d : config.devices)
      if (d.has_uuid && UuidEq(d.uuid, uuid)) match = &d;
  } else if (index >= 0 && index < kMaxDevices && !config.devices[index].has_uuid) {
    match = &config.devices[index];
  }
  uint64_t mem = config.default_memory_limit;
  uint32_t sm = config.default_sm_limit;
  if (match != nullptr) {
    if (match->memory_set) mem = match->memory_limit;
    if (match->sm_set) sm = match->sm_limit;
  } else if (any_uuid && uuid != nullptr) {
    // The config names its devices by UUID and this one is not among them: it was not given
    // to this container through gpushare, so no per-device limit applies (the default does).
  }
  out.memory_limited = mem != 0;
  out.memory_limit = mem;
  out.sm_limit = config.sm_limiter_enabled ? sm : 0;
  return out;
}

void ParseConfigText(const char* text, size_t len, Config* c) {
  c->source = Config::kFile;
  size_t pos = 0;
  int line_no = 0;
  while (pos < len) {
    size_t end = pos;
    while (end < len && text[end] != '\n') ++end;
    ++line_no;
    size_t llen = end - pos;
    const char* line = Trim(text + pos, &llen);
    pos = end + 1;
    if (llen == 0 || line[0] == '#') continue;
    size_t eq = 0;
    while (eq < llen && line[eq] != '=') ++eq;
    if (eq == llen) {
      char where[32];
      snprintf(where, sizeof(where), "line %d", line_no);
      SetProblem(c, true, "expected key=value", where, line, llen);
      continue;
    }
    size_t klen = eq;
    const char* key = Trim(line, &klen);
    size_t vlen = llen - eq - 1;
    const char* value = Trim(line + eq + 1, &vlen);
    ApplyKey(c, key, klen, value, vlen);
  }
}

void ParseEnvironment(GetenvFn getenv_fn, Config* c) {
  bool any = false;
  auto get = [&](const char* name) -> const char* { return getenv_fn(name); };
  if (const char* v = get("CUDA_DEVICE_MEMORY_LIMIT")) {
    any = true;
    ApplySize(c, "CUDA_DEVICE_MEMORY_LIMIT", v, StrLen(v), nullptr, &c->default_memory_limit);
  }
  if (const char* v = get("CUDA_DEVICE_SM_LIMIT")) {
    any = true;
    ApplyPercent(c, "CUDA_DEVICE_SM_LIMIT", v, StrLen(v), nullptr, &c->default_sm_limit);
  }
  for (int i = 0; i < kMaxDevices; ++i) {
    char name[48];
    snprintf(name, sizeof(name), "CUDA_DEVICE_MEMORY_LIMIT_%d", i);
    if (const char* v = get(name)) {
      any = true;
      ApplySize(c, name, v, StrLen(v), &c->devices[i].memory_set, &c->devices[i].memory_limit);
    }
    snprintf(name, sizeof(name), "CUDA_DEVICE_SM_LIMIT_%d", i);
    if (const char* v = get(name)) {
      any = true;
      ApplyPercent(c, name, v, StrLen(v), &c->devices[i].sm_set, &c->devices[i].sm_limit);
    }
  }
  if (const char* v = get("CUDA_DEVICE_MEMORY_SHARED_CACHE")) {
    size_t n = StrLen(v);
    if (n > 0 && !CopyStr(c->region_path, sizeof(c->region_path), v, n))
      SetProblem(c, true, "path too long", "CUDA_DEVICE_MEMORY_SHARED_CACHE", v, n);
  }
  if (const char* v = get("GPU_CORE_UTILIZATION_POLICY")) {
    if (EqualsIgnoreCase(v, StrLen(v), "disable")) c->sm_limiter_enabled = false;
  }
  if (const char* v = get("GPUSHARE_CONTEXT_OVERHEAD"))
    ApplySize(c, "GPUSHARE_CONTEXT_OVERHEAD", v, StrLen(v), &c->context_overhead_set,
              &c->context_overhead);
  if (const char* v = get("GPUSHARE_CONTEXT_CHARGE"))
    ApplyKey(c, "context_charge", 14, v, StrLen(v));
  if (const char* v = get("GPUSHARE_MANAGED_MEMORY"))
    ApplyKey(c, "managed_memory", 14, v, StrLen(v));
  if (const char* v = get("GPUSHARE_IPC_IMPORTS")) ApplyKey(c, "ipc_imports", 11, v, StrLen(v));
  if (const char* v = get("GPUSHARE_EXTERNAL_MEMORY"))
    ApplyKey(c, "external_memory", 15, v, StrLen(v));
  const char* lvl = get("GPUSHARE_LOG_LEVEL");
  if (lvl == nullptr) lvl = get("LIBCUDA_LOG_LEVEL");
  if (lvl != nullptr) {
    uint64_t n = 0;
    if (ParseU64(lvl, StrLen(lvl), &n)) c->log_level = n > 4 ? 4 : static_cast<int>(n);
  }
  if (any) c->source = Config::kEnvironment;
}

}  // namespace gpushare::interpose
