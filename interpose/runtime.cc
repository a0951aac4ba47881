// See runtime.h.
#include "interpose/runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "interpose/base.h"
#include "interpose/context_charge.h"
#include "interpose/log.h"

extern "C" {
// glibc's registration behind pthread_atfork (GLIBC_2.3.2; pthread_atfork itself lives in
// libc_nonshared.a on some glibc versions).
int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
                      void* dso_handle);
extern void* __dso_handle;
// Used by the dlsym trampoline (hooks_entry.cc).
__attribute__((visibility("hidden"))) void* gpushare_real_dlsym_ptr = nullptr;
__attribute__((visibility("hidden"))) void* gpushare_resolve_real_dlsym(void);
}

namespace gpushare::interpose {
namespace {

constexpr uint64_t kDefaultGranularity = 2ull << 20;

struct CtxInfo {
  CUcontext ctx;
  int ordinal;
  int dev;
  uint64_t overhead;
};

constinit int g_init_state = 0;  // 0 = not read, 1 = reading, 2 = done
constinit Config g_config;
constinit bool g_active = false;
constinit int g_sm_state = 0;

constinit Region g_region;
constinit int g_region_state = 0;  // 0 = not attached, 2 = attaching, 1 = ok, 3 = failed
constinit int g_slot_state = 0;    // same encoding, for this process's slot
constinit int g_slot = -1;

constinit pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
constinit AllocTable g_table;
constinit OrdinalInfo g_ordinals[kMaxOrdinals] = {};
constinit PoolInfo g_pools[kMaxPools] = {};
constinit int g_npools = 0;
constinit CtxInfo g_ctxs[kMaxContexts] = {};
constinit int g_nctx = 0;
constinit CUcontext g_primary_ctx[kMaxOrdinals] = {};
constinit int g_primary_refs[kMaxOrdinals] = {};
constinit uint64_t g_graph_charged[kMaxOrdinals] = {};
constinit bool g_graph_possible = false;
constinit uint64_t g_async_step[kMaxOrdinals] = {};
constinit CUmemoryPool g_current_pool[kMaxOrdinals] = {};
constinit uint64_t g_ctx_generation = 1;  // bumped whenever a context is destroyed or reset
constinit LimiterSlot g_limiters[kMaxDevices] = {};

constinit void* g_real[kFnCount] = {};
constinit void* g_driver = nullptr;
constinit void* g_nvml = nullptr;
constinit uintptr_t g_driver_base = 0;
constinit uintptr_t g_nvml_base = 0;
constinit bool g_warned_fail_closed = false;

thread_local bool t_in_init = false;

void* OpenLibrary(void** slot, const char* soname) {
  void* h = LoadAcquire(slot);
  if (h != nullptr) return h;
  h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) h = dlopen(soname, RTLD_NOW);
  if (h == nullptr) return nullptr;
  void* expected = nullptr;
  if (!CasStrong(slot, &expected, h)) dlclose(h);
  return LoadAcquire(slot);
}

void* Driver() {
  return OpenLibrary(&g_driver, "libcuda.so.1");
}
void* Nvml() {
  return OpenLibrary(&g_nvml, "libnvidia-ml.so.1");
}

uintptr_t BaseOf(void* lib, uintptr_t* cache, const char* probe_symbol) {
  uintptr_t b = LoadRelaxed(cache);
  if (b != 0 || lib == nullptr) return b;
  DlsymFn real = RealDlsym();
  void* p = real != nullptr ? real(lib, probe_symbol) : nullptr;
  Dl_info info;
  if (p != nullptr && dladdr(p, &info) != 0) {
    b = reinterpret_cast<uintptr_t>(info.dli_fbase);
    StoreRelaxed(cache, b);
  }
  return b;
}

void AtForkChild() {
  // Only this thread exists in the child. The parent's process-local state (its allocations,
  // contexts, pools) does not belong to the child; the shared region mapping and its flock are
  // inherited. The child takes its own slot on first use.
  static constexpr pthread_mutex_t kFresh = PTHREAD_MUTEX_INITIALIZER;
  memcpy(&g_lock, &kFresh, sizeof(kFresh));
  g_table.Free();
  g_npools = 0;
  g_nctx = 0;
  memset(g_primary_ctx, 0, sizeof(g_primary_ctx));
  memset(g_primary_refs, 0, sizeof(g_primary_refs));
  memset(g_graph_charged, 0, sizeof(g_graph_charged));
  memset(g_async_step, 0, sizeof(g_async_step));
  memset(g_current_pool, 0, sizeof(g_current_pool));
  ++g_ctx_generation;  // the parent's contexts are not the child's
  for (LimiterSlot& l : g_limiters) {
    memcpy(&l.lock, &kFresh, sizeof(kFresh));
    l.tracker.Reset();
    memset(l.events, 0, sizeof(l.events));
    memset(l.unmeasurable, 0, sizeof(l.unmeasurable));
  }
  g_slot = -1;
  StoreRelease(&g_slot_state, 0);
}

void LoadConfig() {
  Config c;
  const char* path = kConfigPath;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    const char* alt = getenv("GPUSHARE_CONFIG");
    if (alt != nullptr && alt[0] != '\0') {
      path = alt;
      fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        c.fail_closed = true;
        snprintf(c.problem, sizeof(c.problem), "GPUSHARE_CONFIG=%s: cannot read it: %s", alt,
                 strerror(errno));
      }
    }
  } else if (fd < 0) {
    c.fail_closed = true;
    snprintf(c.problem, sizeof(c.problem), "%s: cannot read it: %s", path, strerror(errno));
  }
  if (fd >= 0) {
    char buf[16384];
    size_t len = 0;
    for (;;) {
      ssize_t n = read(fd, buf + len, sizeof(buf) - len);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      len += static_cast<size_t>(n);
      if (len == sizeof(buf)) break;
    }
    close(fd);
    if (len == sizeof(buf)) {
      c.source = Config::kFile;
      c.fail_closed = true;
      snprintf(c.problem, sizeof(c.problem), "%s: larger than %zu bytes", path, sizeof(buf));
    } else {
      ParseConfigText(buf, len, &c);
    }
  } else if (!c.fail_closed) {
    ParseEnvironment([](const char* name) -> const char* { return getenv(name); }, &c);
  }
  if (c.region_path[0] == '\0') CopyStr(c.region_path, sizeof(c.region_path), kDefaultRegionPath);
  SetLogLevel(c.log_level);
  g_config = c;
  g_active = c.Active();
  StoreRelease(&g_sm_state, c.AnySmLimit() ? 2 : 1);
  if (c.fail_closed) {
    Log(kLogError,
        "msg=\"configuration unusable; every GPU allocation will be refused\" source=%s "
        "problem=\"%s\"",
        c.source == Config::kFile ? path : "environment", c.problem);
  } else if (c.problem[0] != '\0') {
    Log(kLogWarn, "msg=\"configuration warning\" problem=\"%s\"", c.problem);
  }
  if (g_active) {
    __register_atfork(nullptr, nullptr, &AtForkChild, &__dso_handle);
    Log(kLogInfo, "msg=\"limits active\" source=%s region=%s",
        c.source == Config::kFile ? path : "environment", c.region_path);
  }
}

bool EnsureRegion() {
  int s = LoadAcquire(&g_region_state);
  if (s == 1) return true;
  if (s == 3) return false;
  int expected = 0;
  if (CasStrong(&g_region_state, &expected, 2)) {
    char err[512];
    if (g_region.Attach(g_config.region_path, err, sizeof(err))) {
      StoreRelease(&g_region_state, 1);
      return true;
    }
    Log(kLogError,
        "msg=\"shared accounting region unusable; GPU allocations will be refused\" "
        "reason=\"%s\"",
        err);
    StoreRelease(&g_region_state, 3);
    return false;
  }
  while ((s = LoadAcquire(&g_region_state)) == 2) sched_yield();
  return s == 1;
}

bool EnsureSlot() {
  if (!EnsureRegion()) return false;
  int s = LoadAcquire(&g_slot_state);
  if (s == 1) return true;
  if (s == 3) return false;
  int expected = 0;
  if (CasStrong(&g_slot_state, &expected, 2)) {
    int32_t pid = static_cast<int32_t>(getpid());
    int slot = g_region.RegisterProcess(pid, ProcStartTime(pid));
    if (slot < 0) {
      Log(kLogError,
          "msg=\"no free process slot in the shared region (1024 live processes); "
          "GPU allocations will be refused\"");
      StoreRelease(&g_slot_state, 3);
      return false;
    }
    StoreRelease(&g_slot, slot);
    StoreRelease(&g_slot_state, 1);
    return true;
  }
  while ((s = LoadAcquire(&g_slot_state)) == 2) sched_yield();
  return s == 1;
}

}  // namespace

// ---- real functions
// ------------------------------------------------------------------------------

}  // namespace gpushare::interpose

extern "C" void* gpushare_resolve_real_dlsym(void) {
  using gpushare::interpose::CasStrong;
  using gpushare::interpose::LoadAcquire;
  void* p = LoadAcquire(&gpushare_real_dlsym_ptr);
  if (p != nullptr) return p;
  const char* versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
  for (const char* v : versions) {
    p = dlvsym(RTLD_NEXT, "dlsym", v);
    if (p != nullptr) break;
  }
  // Loaded with dlopen rather than preloaded, RTLD_NEXT does not reach libc: ask it directly
  // (glibc >= 2.34), then libdl (older glibc).
  const char* libs[] = {"libc.so.6", "libdl.so.2"};
  for (const char* lib : libs) {
    void* h = p == nullptr ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : nullptr;
    for (const char* v : versions)
      if (p == nullptr && h != nullptr) p = dlvsym(h, "dlsym", v);
  }
  if (p != nullptr) {
    void* expected = nullptr;
    CasStrong(&gpushare_real_dlsym_ptr, &expected, p);
  }
  return LoadAcquire(&gpushare_real_dlsym_ptr);
}

namespace gpushare::interpose {

DlsymFn RealDlsym() {
  return reinterpret_cast<DlsymFn>(gpushare_resolve_real_dlsym());
}

void* RealFn(int id) {
  void* p = LoadAcquire(&g_real[id]);
  if (p != nullptr) return p;
  void* lib = IsNvmlFn(id) ? Nvml() : Driver();
  DlsymFn real = RealDlsym();
  if (lib == nullptr || real == nullptr) return nullptr;
  p = real(lib, FnName(id));
  if (p == nullptr) return nullptr;
  RememberReal(id, p);
  return LoadAcquire(&g_real[id]);
}

void RememberReal(int id, void* fn) {
  if (fn == nullptr || id < 0 || id >= kFnCount) return;
  void* expected = nullptr;
  CasStrong(&g_real[id], &expected, fn);
}

uintptr_t DriverBase() {
  return BaseOf(Driver(), &g_driver_base, "cuGetProcAddress");
}
uintptr_t NvmlBase() {
  void* lib = LoadAcquire(&g_nvml);
  if (lib == nullptr) lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib != nullptr && LoadAcquire(&g_nvml) == nullptr) {
    void* expected = nullptr;
    if (!CasStrong(&g_nvml, &expected, lib)) dlclose(lib);
  }
  return BaseOf(LoadAcquire(&g_nvml), &g_nvml_base, "nvmlDeviceGetMemoryInfo");
}

// ---- configuration
// --------------------------------------------------------------------------------

void EnsureInit() {
  if (LoadAcquire(&g_init_state) == 2) return;
  if (t_in_init) return;  // re-entered from our own initialisation (an interposed open/read)
  int expected = 0;
  if (CasStrong(&g_init_state, &expected, 1)) {
    t_in_init = true;
    LoadConfig();
    t_in_init = false;
    StoreRelease(&g_init_state, 2);
    return;
  }
  while (LoadAcquire(&g_init_state) != 2) sched_yield();
}

bool Active() {
  EnsureInit();
  return LoadAcquire(&g_init_state) == 2 && g_active;
}

const Config& GetConfig() {
  EnsureInit();
  return g_config;
}

int SmState() {
  int s = LoadAcquire(&g_sm_state);
  if (s != 0) return s;
  EnsureInit();
  s = LoadAcquire(&g_sm_state);
  return s == 0 ? 1 : s;
}

Region& TheRegion() {
  return g_region;
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void LockLocal() {
  pthread_mutex_lock(&g_lock);
}
void UnlockLocal() {
  pthread_mutex_unlock(&g_lock);
}
AllocTable& Table() {
  return g_table;
}

uint64_t LinearFootprint(uint64_t bytes, uint64_t granularity) {
  if (bytes < (1ull << 20)) return RoundUp(bytes, 512);
  return RoundUp(bytes, granularity == 0 ? kDefaultGranularity : granularity);
}

// ---- devices
// ---------------------------------------------------------------------------------------

const OrdinalInfo* Ordinal(int ordinal) {
  if (ordinal < 0 || ordinal >= kMaxOrdinals) return nullptr;
  OrdinalInfo* o = &g_ordinals[ordinal];
  if (LoadAcquire(&o->probed) == 1) return o;
  LockLocal();
  if (o->probed == 1) {
    UnlockLocal();
    return o;
  }
  uint8_t uuid[16] = {};
  bool have_uuid = false;
  CUuuid u;
  auto get_uuid_v2 = Real<CUresult (*)(CUuuid*, CUdevice)>(kFn_cuDeviceGetUuid_v2);
  auto get_uuid = Real<CUresult (*)(CUuuid*, CUdevice)>(kFn_cuDeviceGetUuid);
  if ((get_uuid_v2 != nullptr && get_uuid_v2(&u, ordinal) == CUDA_SUCCESS) ||
      (get_uuid != nullptr && get_uuid(&u, ordinal) == CUDA_SUCCESS)) {
    memcpy(uuid, u.bytes, 16);
    have_uuid = !UuidIsZero(uuid);
  }
  DeviceLimits lim = LimitsFor(g_config, ordinal, have_uuid ? uuid : nullptr);
  o->dev = kDevNotAccounted;
  o->sm_limit = 0;
  o->limit = 0;
  o->memory_limited = 0;
  o->granularity = kDefaultGranularity;
  auto gran_fn = Real<CUresult (*)(size_t*, const CUmemAllocationProp*, int)>(
      kFn_cuMemGetAllocationGranularity);
  if (gran_fn != nullptr) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal;
    size_t g = 0;
    if (gran_fn(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS && g != 0)
      o->granularity = g;
  }
  if (lim.memory_limited || lim.sm_limit != 0) {
    if (!have_uuid) {
      // No UUID from the driver: key the device by its ordinal (documented limitation).
      const char tag[] = "gpushare-ordnl";
      memcpy(uuid, tag, 14);
      uuid[14] = 0xff;
      uuid[15] = static_cast<uint8_t>(ordinal);
    }
    if (EnsureSlot()) {
      int dev = g_region.FindOrAddDevice(uuid, lim);
      if (dev >= 0) {
        RegionDevice& rd = g_region.file()->devices[dev];
        if (rd.memory_limit != lim.memory_limit || (rd.limited != 0) != lim.memory_limited ||
            rd.sm_limit != lim.sm_limit) {
          char id[41];
          FormatUuid(uuid, id);
          Log(kLogWarn,
              "msg=\"this process is configured with other limits than the container's region; "
              "the region's apply until every process of the container has exited\" uuid=%s "
              "region_limit=%llu own_limit=%llu region_sm=%u own_sm=%u",
              id, static_cast<unsigned long long>(rd.memory_limit),
              static_cast<unsigned long long>(lim.memory_limit), rd.sm_limit, lim.sm_limit);
        }
        o->dev = rd.limited != 0 || rd.sm_limit != 0 ? dev : kDevNotAccounted;
        o->limit = rd.limited != 0 ? rd.memory_limit : 0;
        o->memory_limited = rd.limited != 0 ? 1 : 0;
        o->sm_limit = rd.sm_limit;
      } else {
        Log(kLogError, "msg=\"shared region device table full; refusing allocations\" ordinal=%d",
            ordinal);
        o->dev = kDevRegionUnusable;
        o->memory_limited = 1;
      }
    } else {
      o->dev = kDevRegionUnusable;  // limited but no usable region: refuse (never over-commit)
      o->limit = lim.memory_limit;
      o->memory_limited = 1;
    }
  }
  memcpy(o->uuid, uuid, 16);
  StoreRelease(&o->probed, uint32_t{1});
  UnlockLocal();
  return o;
}

// The device of the context a thread used last: a context's device never changes, so only a
// different context (or one destroyed since: the handle may be reused) asks the driver again.
struct ThreadContextCache {
  CUcontext ctx;
  int ordinal;
  uint64_t generation;
};
thread_local ThreadContextCache t_ctx_cache = {nullptr, -1, 0};

bool CurrentContext(CUcontext* ctx, int* ordinal) {
  auto get_ctx = Real<CUresult (*)(CUcontext*)>(kFn_cuCtxGetCurrent);
  if (get_ctx == nullptr) return false;
  CUcontext c = nullptr;
  if (get_ctx(&c) != CUDA_SUCCESS || c == nullptr) return false;
  ThreadContextCache& cache = t_ctx_cache;
  uint64_t generation = LoadAcquire(&g_ctx_generation);
  if (cache.ctx == c && cache.generation == generation) {
    *ctx = c;
    *ordinal = cache.ordinal;
    return true;
  }
  auto get_dev = Real<CUresult (*)(CUdevice*)>(kFn_cuCtxGetDevice);
  CUdevice d = -1;
  if (get_dev == nullptr || get_dev(&d) != CUDA_SUCCESS) return false;
  cache = ThreadContextCache{c, d, generation};
  *ctx = c;
  *ordinal = d;
  return true;
}

// ---- accounting
// ------------------------------------------------------------------------------------

bool Reserve(int dev, uint64_t bytes, const char* api) {
  if (g_config.fail_closed || dev == kDevRegionUnusable) {
    if (!LoadRelaxed(&g_warned_fail_closed)) {
      StoreRelaxed(&g_warned_fail_closed, true);
      Log(kLogError,
          "msg=\"GPU allocation refused: limits cannot be enforced\" api=%s problem=\"%s\"", api,
          g_config.fail_closed ? g_config.problem : "shared region unusable");
    }
    return false;
  }
  if (dev < 0) return true;
  if (!EnsureSlot()) return false;  // a forked child takes its own slot here
  int slot = LoadAcquire(&g_slot);
  g_region.MaybeReclaim(NowNs());
  ReserveResult r = g_region.Reserve(slot, dev, bytes);
  if (r == ReserveResult::kOk) return true;
  if (r == ReserveResult::kOverLimit && (HasPools() || LoadRelaxed(&g_graph_possible))) {
    RefreshPools();  // a pool or graph may have released memory at a sync point we did not see
    RefreshGraphMemory(-1);
    if (g_region.Reserve(slot, dev, bytes) == ReserveResult::kOk) return true;
  }
  RegionDevice& d = g_region.file()->devices[dev];
  Log(kLogNotice,
      "msg=\"GPU allocation refused: over the container's memory limit\" api=%s bytes=%llu "
      "used=%llu limit=%llu",
      api, static_cast<unsigned long long>(bytes),
      static_cast<unsigned long long>(LoadRelaxed(&d.used)),
      static_cast<unsigned long long>(d.memory_limit));
  return false;
}

void Unreserve(int dev, uint64_t bytes) {
  if (dev < 0 || bytes == 0) return;
  g_region.Release(LoadAcquire(&g_slot), dev, bytes);
}

void ForceCharge(int dev, uint64_t bytes) {
  if (dev < 0 || bytes == 0 || !EnsureSlot()) return;
  g_region.Charge(LoadAcquire(&g_slot), dev, bytes);
}

bool AttachRegionForQueries() {
  return Active() && EnsureRegion();
}

uint64_t ContainerUsed(int dev) {
  if (dev < 0 || !EnsureRegion()) return 0;
  return g_region.Used(dev);
}

// ---- pools
// -----------------------------------------------------------------------------------------

PoolInfo* FindPool(CUmemoryPool pool) {
  for (int i = 0; i < g_npools; ++i)
    if (g_pools[i].pool == pool) return &g_pools[i];
  return nullptr;
}

PoolInfo* AddPool(CUmemoryPool pool, int ordinal, int dev) {
  PoolInfo* p = FindPool(pool);
  if (p != nullptr) return p;
  if (g_npools == kMaxPools) {
    Log(kLogWarn, "msg=\"too many memory pools; newest not followed\" limit=%d", kMaxPools);
    return nullptr;
  }
  p = &g_pools[g_npools++];
  *p = PoolInfo{pool, ordinal, dev, 0, 0, false, 0};
  return p;
}

CUmemoryPool CurrentPool(int ordinal) {
  return ordinal >= 0 && ordinal < kMaxOrdinals ? g_current_pool[ordinal] : nullptr;
}

void SetCurrentPool(int ordinal, CUmemoryPool pool) {
  if (ordinal >= 0 && ordinal < kMaxOrdinals) g_current_pool[ordinal] = pool;
}

void RemovePool(PoolInfo* p) {
  int i = static_cast<int>(p - g_pools);
  g_pools[i] = g_pools[--g_npools];
}

bool HasPools() {
  return LoadRelaxed(&g_npools) != 0;
}

uint64_t AsyncGrowthStep(int ordinal) {
  if (ordinal < 0 || ordinal >= kMaxOrdinals) return kDefaultGranularity;
  uint64_t s = LoadRelaxed(&g_async_step[ordinal]);
  uint64_t g = g_ordinals[ordinal].granularity;
  return Max(s, g == 0 ? kDefaultGranularity : g);
}

void NoteAsyncGrowth(int ordinal, uint64_t growth) {
  if (ordinal < 0 || ordinal >= kMaxOrdinals) return;
  uint64_t s = LoadRelaxed(&g_async_step[ordinal]);
  while (growth > s && !CasStrong(&g_async_step[ordinal], &s, growth)) {
  }
}

void RefreshPools() {
  auto get_attr = Real<CUresult (*)(CUmemoryPool, int, void*)>(kFn_cuMemPoolGetAttribute);
  if (get_attr == nullptr) return;
  struct Adjust {
    int dev;
    uint64_t up, down;
  };
  Adjust adj[kMaxPools];
  int n = 0;
  LockLocal();
  for (int i = 0; i < g_npools; ++i) {
    PoolInfo& p = g_pools[i];
    if (p.dev < 0) continue;
    uint64_t reserved = 0;
    if (get_attr(p.pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS) continue;
    if (reserved != p.charged) {
      adj[n++] = Adjust{p.dev, SatSub(reserved, p.charged), SatSub(p.charged, reserved)};
      p.charged = reserved;
    }
  }
  UnlockLocal();
  for (int i = 0; i < n; ++i) {
    ForceCharge(adj[i].dev, adj[i].up);
    Unreserve(adj[i].dev, adj[i].down);
  }
}

void NoteGraphMemoryPossible() {
  StoreRelaxed(&g_graph_possible, true);
}
bool GraphMemoryPossible() {
  return LoadRelaxed(&g_graph_possible);
}

void RefreshGraphMemory(int ordinal) {
  if (!LoadRelaxed(&g_graph_possible)) return;
  auto get_attr = Real<CUresult (*)(CUdevice, int, void*)>(kFn_cuDeviceGetGraphMemAttribute);
  if (get_attr == nullptr) return;
  int lo = ordinal < 0 ? 0 : ordinal;
  int hi = ordinal < 0 ? kMaxOrdinals : ordinal + 1;
  for (int i = lo; i < hi && i < kMaxOrdinals; ++i) {
    const OrdinalInfo* o = &g_ordinals[i];
    if (LoadAcquire(&o->probed) != 1 || o->dev < 0 || o->memory_limited == 0) continue;
    uint64_t reserved = 0;
    if (get_attr(i, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS) continue;
    LockLocal();
    uint64_t before = g_graph_charged[i];
    g_graph_charged[i] = reserved;
    UnlockLocal();
    ForceCharge(o->dev, SatSub(reserved, before));
    Unreserve(o->dev, SatSub(before, reserved));
  }
}

// ---- contexts
// --------------------------------------------------------------------------------------

namespace {

constinit int g_nvml_state = 0;  // 0 = not tried, 2 = initialising, 1 = ready, 3 = unusable

bool NvmlReady() {
  int s = LoadAcquire(&g_nvml_state);
  if (s == 1 || s == 3) return s == 1;
  int expected = 0;
  if (CasStrong(&g_nvml_state, &expected, 2)) {
    // One reference held for the process's lifetime: an application's own init/shutdown pairs
    // keep working (NVML counts references).
    auto init = Real<nvmlReturn_t (*)(void)>(kFn_nvmlInit_v2);
    bool ok = init != nullptr && init() == nvml::NVML_SUCCESS;
    StoreRelease(&g_nvml_state, ok ? 1 : 3);
    if (!ok) Log(kLogDebug, "msg=\"NVML not usable: contexts are charged without a measurement\"");
    return ok;
  }
  while ((s = LoadAcquire(&g_nvml_state)) == 2) sched_yield();
  return s == 1;
}

// The device's used memory as NVML reports it (v1: the driver's reservation counted as used,
// the same figure nvidia-smi shows).
bool NvmlUsed(nvmlDevice_t device, uint64_t* used) {
  auto info = Real<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*)>(kFn_nvmlDeviceGetMemoryInfo);
  nvmlMemory_t m{};
  if (info == nullptr || info(device, &m) != nvml::NVML_SUCCESS) return false;
  *used = m.used;
  return true;
}

// The charge decision's configuration and the region's earlier measurement for a device.
ContextChargeInput ChargeInputFor(int dev) {
  ContextChargeInput in;
  in.fixed = g_config.context_charge_fixed;
  in.overhead_set = g_config.context_overhead_set;
  in.overhead = g_config.context_overhead;
  if (dev >= 0 && EnsureRegion())
    in.earlier = LoadRelaxed(&g_region.file()->devices[dev].context_measured);
  return in;
}
}  // namespace

bool BeginContextProbe(int ordinal, ContextProbe* probe, const char* api) {
  *probe = ContextProbe{};
  if (!Active()) return true;
  const OrdinalInfo* o = Ordinal(ordinal);
  // Fail-closed configurations refuse allocations, not contexts (a process must be able to
  // start and report the problem).
  if (o == nullptr || o->dev < 0 || o->memory_limited == 0 || g_config.fail_closed) return true;
  // What the context is expected to cost (context_charge.h without a measurement) must fit
  // before the driver makes it: several processes of a container, each with its own context,
  // stay within one limit.
  uint64_t expected = DecideContextCharge(ChargeInputFor(o->dev)).bytes;
  if (expected > o->limit && ContainerUsed(o->dev) == 0) {
    // A limit that cannot hold even one context: the container's first process still starts
    // and its queries answer (HAMi#1370); every allocation is refused.
    ForceCharge(o->dev, expected);
  } else if (!Reserve(o->dev, expected, api)) {
    return false;
  }
  probe->dev = o->dev;
  probe->reserved = expected;
  if (g_config.context_charge_fixed || UuidIsZero(o->uuid) || !NvmlReady()) return true;
  auto by_uuid = Real<nvmlReturn_t (*)(const char*, nvmlDevice_t*)>(kFn_nvmlDeviceGetHandleByUUID);
  char text[48];
  FormatUuid(o->uuid, text);  // "GPU-..."; NVML answers MIG UUIDs under their own prefix
  nvmlDevice_t h = nullptr;
  if (by_uuid == nullptr || by_uuid(text, &h) != nvml::NVML_SUCCESS) {
    text[0] = 'M', text[1] = 'I', text[2] = 'G';
    if (by_uuid == nullptr || by_uuid(text, &h) != nvml::NVML_SUCCESS) return true;
  }
  probe->nvml = h;
  probe->taken = NvmlUsed(h, &probe->used_before);
  return true;
}

void CancelContextProbe(const ContextProbe& probe) {
  if (probe.dev >= 0) Unreserve(probe.dev, probe.reserved);
}

int PrimaryRefs(int ordinal) {
  if (ordinal < 0 || ordinal >= kMaxOrdinals) return 0;
  LockLocal();
  int n = g_primary_refs[ordinal];
  UnlockLocal();
  return n;
}

void OnContextCreated(CUcontext ctx, int ordinal, const ContextProbe& probe) {
  const OrdinalInfo* o = Ordinal(ordinal);
  if (o == nullptr || o->dev < 0 || o->memory_limited == 0 || probe.dev != o->dev) {
    CancelContextProbe(probe);
    return;
  }
  ContextChargeInput in = ChargeInputFor(o->dev);
  in.used_before = probe.used_before;
  in.measured = probe.taken && NvmlUsed(probe.nvml, &in.used_after);
  ContextCharge charge = DecideContextCharge(in);
  uint64_t overhead = charge.bytes;
  RegionDevice* rd = EnsureRegion() ? &g_region.file()->devices[o->dev] : nullptr;
  if (rd != nullptr) {
    if (charge.measured != 0) StoreRelaxed(&rd->context_measured, charge.measured);
    StoreRelaxed(&rd->context_charge, overhead);
    StoreRelaxed(&rd->context_charge_source, static_cast<uint64_t>(charge.source));
  }
  Log(kLogInfo, "msg=\"context charged\" ordinal=%d bytes=%llu source=%s", ordinal,
      static_cast<unsigned long long>(overhead), ChargeSourceName(charge.source));
  LockLocal();
  bool added = false;
  if (g_nctx < kMaxContexts) {
    g_ctxs[g_nctx++] = CtxInfo{ctx, ordinal, o->dev, overhead};
    added = true;
  }
  UnlockLocal();
  if (!added) {
    CancelContextProbe(probe);
    return;
  }
  // The driver already holds what the context took: a measurement above the reservation is
  // charged without a check (the next context of the container reserves the measured figure).
  ForceCharge(o->dev, SatSub(overhead, probe.reserved));
  Unreserve(o->dev, SatSub(probe.reserved, overhead));
}

void OnContextDestroyed(CUcontext ctx, bool destroyed_context) {
  uint64_t release[kMaxDevices] = {};
  LockLocal();
  if (destroyed_context) {
    for (int i = 0; i < g_nctx; ++i) {
      if (g_ctxs[i].ctx != ctx) continue;
      if (g_ctxs[i].dev >= 0)
        release[g_ctxs[i].dev] = SatAdd(release[g_ctxs[i].dev], g_ctxs[i].overhead);
      g_ctxs[i] = g_ctxs[--g_nctx];
      break;
    }
  }
  uint64_t key = reinterpret_cast<uint64_t>(ctx);
  // Its handle may come back for another context: every thread asks the driver again.
  FetchAdd(&g_ctx_generation, uint64_t{1});
  // A reset or destroyed context may take its device's pools with it: learn them again.
  memset(g_current_pool, 0, sizeof(g_current_pool));
  g_table.RemoveIf([&](const AllocEntry& e) {
    if (e.ctx != key) return false;
    if (e.kind == AllocKind::kVmmHandle || e.kind == AllocKind::kVmmMapping) return false;
    if (e.dev >= 0 && e.dev < kMaxDevices) release[e.dev] = SatAdd(release[e.dev], e.bytes);
    if (e.kind == AllocKind::kAsync) {
      PoolInfo* p = FindPool(reinterpret_cast<CUmemoryPool>(e.aux));
      if (p != nullptr && p->outstanding > 0) --p->outstanding;
      if (p != nullptr) p->in_use = SatSub(p->in_use, e.pool_use);
    }
    return true;
  });
  UnlockLocal();
  for (int d = 0; d < kMaxDevices; ++d) Unreserve(d, release[d]);
  RefreshPools();
}

CUcontext PrimaryContextOf(int ordinal) {
  if (ordinal < 0 || ordinal >= kMaxOrdinals) return nullptr;
  LockLocal();
  CUcontext c = g_primary_ctx[ordinal];
  UnlockLocal();
  return c;
}

int PrimaryRetain(int ordinal, CUcontext ctx) {
  if (ordinal < 0 || ordinal >= kMaxOrdinals) return 0;
  LockLocal();
  g_primary_ctx[ordinal] = ctx;
  int n = ++g_primary_refs[ordinal];
  UnlockLocal();
  return n;
}

int PrimaryRelease(int ordinal) {
  if (ordinal < 0 || ordinal >= kMaxOrdinals) return 0;
  LockLocal();
  int n = g_primary_refs[ordinal] > 0 ? --g_primary_refs[ordinal] : 0;
  UnlockLocal();
  return n;
}

// ---- SM limiter
// ------------------------------------------------------------------------------------

LimiterSlot* Limiter(int dev) {
  if (dev < 0 || dev >= kMaxDevices) return nullptr;
  return &g_limiters[dev];
}

SmBucket* SharedBucket(int dev) {
  if (dev < 0 || dev >= kMaxDevices || g_region.file() == nullptr) return nullptr;
  return &g_region.file()->devices[dev].sm_bucket;
}

}  // namespace gpushare::interpose
