// The fake CUDA driver (see fake_cuda_control.h and CMakeLists.txt). It follows the driver's
// documented behaviour where the interposer depends on it, including the inconvenient parts:
// cuMemAllocPitch chooses its own pitch; arrays are padded and only
// cu(Mipmapped)ArrayGetMemoryRequirements tells by how much; stream-ordered pools keep freed
// memory until a synchronisation or trim releases what exceeds their release threshold, and
// grow in chunks; VMM memory lives until its handle is released AND unmapped; a destroyed
// context frees every allocation made in it; cuMemGetInfo needs a current context and sees the
// other tenants of the (shared) GPU; cuGetProcAddress answers by ABI version and
// per-thread-stream flag from the table generated from cudaTypedefs.h.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "interpose/cuda_abi.h"
#include "tests/fakes/native/cuda/fake_cuda_control.h"

using namespace gpushare::cuda;  // NOLINT

namespace {

// ---- exports and call counters
// -------------------------------------------------------------------
enum ExportId : int {
#define GPUSHARE_CUDA_EXPORT(name) kExp_##name,
#include "interpose/generated/libcuda_exports.inc"
#undef GPUSHARE_CUDA_EXPORT
  kExportCount
};
const char* const kExportNames[] = {
#define GPUSHARE_CUDA_EXPORT(name) #name,
#include "interpose/generated/libcuda_exports.inc"
#undef GPUSHARE_CUDA_EXPORT
};

std::atomic<uint64_t> g_calls[kExportCount + 1];
struct Failure {
  std::atomic<int> remaining{0};
  std::atomic<int> result{0};
};
Failure g_fail[kExportCount + 1];

int ExportIndex(const char* name) {
  for (int i = 0; i < kExportCount; ++i)
    if (strcmp(kExportNames[i], name) == 0) return i;
  return -1;
}

// Counts the call and applies injected failures. Used at the top of every implementation.
#define FAKE_ENTER(name)                                                     \
  do {                                                                       \
    g_calls[kExp_##name].fetch_add(1, std::memory_order_relaxed);            \
    if (g_fail[kExp_##name].remaining.load(std::memory_order_relaxed) > 0 && \
        g_fail[kExp_##name].remaining.fetch_sub(1) > 0)                      \
      return g_fail[kExp_##name].result.load();                              \
  } while (0)

// ---- configuration
// -------------------------------------------------------------------------------
constexpr int kMaxDev = 16;
struct DeviceConf {
  std::string uuid_text;
  uint8_t uuid[16] = {};
  uint64_t total = 80ull << 30;
};
struct Conf {
  int devices = 1;
  DeviceConf dev[kMaxDev];
  int sm_count = 132;
  int driver_version = 13000;
  uint64_t context_overhead = 0;
  uint64_t granularity = 2ull << 20;
  uint64_t pitch_align = 512;
  uint64_t pool_chunk = 2ull << 20;
  uint64_t kernel_ns = 10000;
  uint64_t array_pad = 0;  // extra bytes every array takes (a driver padding more than tiling)
  std::string state_file;
  bool ctx_device_fails_off_main_thread = false;
};

bool ParseUuidText(const std::string& s, uint8_t out[16]) {
  std::string hex;
  for (size_t i = (s.rfind("GPU-", 0) == 0 || s.rfind("MIG-", 0) == 0) ? 4 : 0; i < s.size(); ++i)
    if (s[i] != '-') hex += s[i];
  if (hex.size() != 32) return false;
  for (int i = 0; i < 16; ++i)
    out[i] = static_cast<uint8_t>(std::stoul(hex.substr(i * 2, 2), nullptr, 16));
  return true;
}

Conf LoadConf() {
  Conf c;
  for (int i = 0; i < kMaxDev; ++i) {
    char buf[64];
    snprintf(buf, sizeof(buf), "GPU-fa4e0000-0000-0000-0000-0000000000%02d", i);
    c.dev[i].uuid_text = buf;
  }
  const char* path = getenv("FAKE_CUDA_CONFIG");
  if (path != nullptr && path[0] != '\0') {
    FILE* f = fopen(path, "r");
    if (f == nullptr) {
      fprintf(stderr, "fakecuda: cannot read FAKE_CUDA_CONFIG=%s\n", path);
    } else {
      char line[512];
      while (fgets(line, sizeof(line), f) != nullptr) {
        std::string l(line);
        while (!l.empty() && (l.back() == '\n' || l.back() == '\r' || l.back() == ' '))
          l.pop_back();
        if (l.empty() || l[0] == '#') continue;
        size_t eq = l.find('=');
        if (eq == std::string::npos) continue;
        std::string k = l.substr(0, eq), v = l.substr(eq + 1);
        uint64_t n = strtoull(v.c_str(), nullptr, 10);
        if (k == "devices")
          c.devices = std::clamp(static_cast<int>(n), 1, kMaxDev);
        else if (k == "sm_count")
          c.sm_count = static_cast<int>(n);
        else if (k == "driver_version")
          c.driver_version = static_cast<int>(n);
        else if (k == "context_overhead_mib")
          c.context_overhead = n << 20;
        else if (k == "granularity_kib")
          c.granularity = n << 10;
        else if (k == "pitch_align")
          c.pitch_align = n;
        else if (k == "pool_chunk_kib")
          c.pool_chunk = n << 10;
        else if (k == "kernel_ns")
          c.kernel_ns = n;
        else if (k == "array_pad_kib")
          c.array_pad = n << 10;
        else if (k == "state_file")
          c.state_file = v;
        else if (k == "ctx_device_fails_off_main_thread")
          c.ctx_device_fails_off_main_thread = n != 0;
        else if (k.rfind("device.", 0) == 0) {
          size_t dot = k.find('.', 7);
          int i = atoi(k.substr(7, dot - 7).c_str());
          if (i < 0 || i >= kMaxDev || dot == std::string::npos) continue;
          std::string field = k.substr(dot + 1);
          if (field == "uuid")
            c.dev[i].uuid_text = v;
          else if (field == "total_mib")
            c.dev[i].total = n << 20;
        }
      }
      fclose(f);
    }
  }
  for (int i = 0; i < kMaxDev; ++i) ParseUuidText(c.dev[i].uuid_text, c.dev[i].uuid);
  return c;
}

uint64_t RoundUp(uint64_t v, uint64_t unit) {
  return unit == 0 ? v : (v + unit - 1) / unit * unit;
}
uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// ---- physical memory (optionally shared across processes) ---------------------------------------
constexpr int kSharedSlots = 256;
struct SharedState {
  uint64_t magic;
  pthread_mutex_t mutex;
  uint64_t high[kMaxDev];
  struct {
    int32_t pid;
    uint64_t used[kMaxDev];
  } slots[kSharedSlots];
};

bool PidAlive(int32_t pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return true;
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return true;
  buf[n] = 0;
  char* p = strrchr(buf, ')');
  return !(p != nullptr && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

struct Physical {
  SharedState* shared = nullptr;
  int slot = -1;
  uint64_t local_used[kMaxDev] = {};
  uint64_t local_high[kMaxDev] = {};

  void Attach(const std::string& path) {
    if (path.empty()) return;
    int fd = open(path.c_str(), O_RDWR | O_CREAT, 0666);
    if (fd < 0) return;
    // First creator initialises under flock.
    if (flock(fd, LOCK_EX) != 0) {
      close(fd);
      return;
    }
    off_t size = lseek(fd, 0, SEEK_END);
    if (size != static_cast<off_t>(sizeof(SharedState))) {
      if (ftruncate(fd, sizeof(SharedState)) != 0) {
        close(fd);
        return;
      }
    }
    void* m = mmap(nullptr, sizeof(SharedState), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      close(fd);
      return;
    }
    shared = static_cast<SharedState*>(m);
    if (shared->magic != 0x46414b4543554441ull) {
      memset(shared, 0, sizeof(*shared));
      pthread_mutexattr_t a;
      pthread_mutexattr_init(&a);
      pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
      pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
      pthread_mutex_init(&shared->mutex, &a);
      shared->magic = 0x46414b4543554441ull;
    }
    flock(fd, LOCK_UN);
    close(fd);
    Lock();
    int32_t me = getpid();
    for (int i = 0; i < kSharedSlots && slot < 0; ++i)
      if (shared->slots[i].pid == me || !PidAlive(shared->slots[i].pid)) {
        shared->slots[i].pid = me;
        memset(shared->slots[i].used, 0, sizeof(shared->slots[i].used));
        slot = i;
      }
    Unlock();
  }
  void Lock() {
    if (pthread_mutex_lock(&shared->mutex) == EOWNERDEAD) pthread_mutex_consistent(&shared->mutex);
  }
  void Unlock() { pthread_mutex_unlock(&shared->mutex); }

  // Sum over live processes (dead ones' memory was freed by the "driver"). Caller locks.
  uint64_t TotalLocked(int dev) {
    uint64_t t = 0;
    for (auto& s : shared->slots) {
      if (s.pid == 0) continue;
      if (!PidAlive(s.pid)) {
        s.pid = 0;
        memset(s.used, 0, sizeof(s.used));
        continue;
      }
      t += s.used[dev];
    }
    return t;
  }
  uint64_t Total(int dev) {
    if (shared == nullptr) return local_used[dev];
    Lock();
    uint64_t t = TotalLocked(dev);
    Unlock();
    return t;
  }
  // Takes bytes if the device has room. False = the GPU is full (CUDA_ERROR_OUT_OF_MEMORY).
  bool Take(int dev, uint64_t bytes, uint64_t capacity) {
    if (shared == nullptr) {
      if (local_used[dev] + bytes > capacity) return false;
      local_used[dev] += bytes;
      local_high[dev] = std::max(local_high[dev], local_used[dev]);
      return true;
    }
    Lock();
    uint64_t t = TotalLocked(dev);
    bool ok = t + bytes <= capacity && slot >= 0;
    if (ok) {
      shared->slots[slot].used[dev] += bytes;
      local_used[dev] += bytes;
      shared->high[dev] = std::max(shared->high[dev], t + bytes);
    }
    Unlock();
    return ok;
  }
  void Give(int dev, uint64_t bytes) {
    bytes = std::min(bytes, local_used[dev]);
    local_used[dev] -= bytes;
    if (shared == nullptr || slot < 0) return;
    Lock();
    shared->slots[slot].used[dev] -= std::min(bytes, shared->slots[slot].used[dev]);
    Unlock();
  }
  uint64_t High(int dev) {
    if (shared == nullptr) return local_high[dev];
    Lock();
    uint64_t h = shared->high[dev];
    Unlock();
    return h;
  }
  void ResetHigh() {
    for (int d = 0; d < kMaxDev; ++d) local_high[d] = local_used[d];
    if (shared == nullptr) return;
    Lock();
    for (int d = 0; d < kMaxDev; ++d) shared->high[d] = TotalLocked(d);
    Unlock();
  }
};

// ---- driver objects
// ------------------------------------------------------------------------------
struct Ctx {
  int dev;
  bool primary;
  uint64_t overhead;
};
struct Pool {
  int dev;
  uint64_t reserved = 0, used = 0, threshold = 0, max_size = 0;
  uint64_t reserved_high = 0, used_high = 0;
  bool destroyed = false;
};
enum class ObjKind { kLinear, kPoolPtr, kIpc };
struct PtrObj {
  ObjKind kind;
  int dev;
  uint64_t bytes;  // physical footprint (0 for IPC and pool pointers)
  uint64_t size;   // requested size
  Ctx* ctx;
  Pool* pool;
};
struct HandleObj {  // arrays, mipmapped arrays, external memory
  int dev;
  uint64_t bytes;
  Ctx* ctx;
};
struct PhysHandle {
  int dev;
  uint64_t size;
  int refs = 1;
  int maps = 0;
  uint64_t physical_id;  // shared by imports of the same allocation
};
struct Physical_ {
  int dev;
  uint64_t size;
  int holders;  // handles referencing it
};
struct Mapping {
  uint64_t handle;
  uint64_t size;
};
struct Stream {
  uint64_t tail = 0;
  bool capturing = false;
  Ctx* ctx = nullptr;
};
struct Event {
  uint64_t time = 0;
  bool recorded = false;
};
struct Func {
  uint64_t ns;
};
struct Graph {
  uint64_t alloc_bytes = 0;
  int dev = 0;
};
struct GraphExec {
  uint64_t alloc_bytes;
  int dev;
};

struct Driver {
  std::mutex mu;
  Conf conf;
  Physical phys;
  bool initialised = false;
  pid_t main_tid = 0;
  Ctx* primary[kMaxDev] = {};
  int primary_refs[kMaxDev] = {};
  std::vector<Ctx*> contexts;
  Pool* default_pool[kMaxDev] = {};
  Pool* current_pool[kMaxDev] = {};
  std::vector<Pool*> pools;
  std::unordered_map<uint64_t, PtrObj> ptrs;
  std::unordered_map<void*, HandleObj> handles;
  std::unordered_map<uint64_t, PhysHandle> vmm;
  std::unordered_map<uint64_t, Physical_> vmm_phys;
  std::map<uint64_t, Mapping> mappings;             // ordered: retain by address inside a mapping
  std::unordered_map<uint64_t, uint64_t> exported;  // shareable handle -> physical id
  std::unordered_map<void*, Stream> streams;
  uint64_t graph_reserved[kMaxDev] = {};
  uint64_t busy_ns[kMaxDev] = {};
  uint64_t next_va = 0x7f0000000000ull;
  uint64_t next_handle = 1;

  uint64_t Va(uint64_t size, uint64_t align = 512) {
    next_va = RoundUp(next_va, align);
    uint64_t p = next_va;
    next_va += RoundUp(size == 0 ? 1 : size, 512);
    return p;
  }
  bool Take(int dev, uint64_t bytes) { return phys.Take(dev, bytes, conf.dev[dev].total); }
  void Give(int dev, uint64_t bytes) { phys.Give(dev, bytes); }
  uint64_t LinearFootprint(uint64_t bytes) const {
    return bytes < (1ull << 20) ? RoundUp(bytes, 512) : RoundUp(bytes, conf.granularity);
  }
};

Driver& D() {
  static Driver* d = [] {
    auto* x = new Driver();
    x->conf = LoadConf();
    x->phys.Attach(x->conf.state_file);
    x->main_tid = getpid();
    return x;
  }();
  return *d;
}

thread_local std::vector<Ctx*> t_ctx_stack;
Ctx* Current() {
  return t_ctx_stack.empty() ? nullptr : t_ctx_stack.back();
}

// Arrays are block-linear: rows padded to 512 B, height to 32 rows, the whole to 64 KiB.
uint64_t ArrayFootprint(uint64_t w, uint64_t h, uint64_t d, int format, unsigned ch) {
  uint64_t row = RoundUp((w == 0 ? 1 : w) * ArrayElementBytes(format, ch), 512);
  return RoundUp(row * RoundUp(h == 0 ? 1 : h, 32) * (d == 0 ? 1 : d), 64 << 10);
}

// Frees everything a context owned (the driver does that when the context goes away).
void FreeContextObjectsLocked(Driver& d, Ctx* c) {
  for (auto it = d.ptrs.begin(); it != d.ptrs.end();) {
    if (it->second.ctx == c) {
      if (it->second.kind == ObjKind::kPoolPtr && it->second.pool != nullptr)
        it->second.pool->used -= std::min(it->second.pool->used, RoundUp(it->second.size, 512));
      d.Give(it->second.dev, it->second.bytes);
      it = d.ptrs.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = d.handles.begin(); it != d.handles.end();) {
    if (it->second.ctx == c) {
      d.Give(it->second.dev, it->second.bytes);
      it = d.handles.erase(it);
    } else {
      ++it;
    }
  }
}

void ReleasePoolExcessLocked(Driver& d, Pool* p, uint64_t keep) {
  uint64_t target = std::max(RoundUp(p->used, d.conf.pool_chunk), RoundUp(keep, d.conf.pool_chunk));
  if (target < p->reserved) {
    d.Give(p->dev, p->reserved - target);
    p->reserved = target;
  }
}

// A synchronisation point: pools release what exceeds their release threshold.
void SyncPointLocked(Driver& d) {
  for (Pool* p : d.pools) ReleasePoolExcessLocked(d, p, p->threshold);
}

Stream& StreamOf(Driver& d, CUstream s) {
  return d.streams[reinterpret_cast<void*>(s)];
}

// Lazily created default pool of a device.
Pool* DefaultPool(Driver& d, int dev) {
  if (d.default_pool[dev] == nullptr) {
    d.default_pool[dev] = new Pool();
    d.default_pool[dev]->dev = dev;
    d.pools.push_back(d.default_pool[dev]);
    if (d.current_pool[dev] == nullptr) d.current_pool[dev] = d.default_pool[dev];
  }
  return d.default_pool[dev];
}

CUresult PoolAlloc(Driver& d, Pool* p, CUdeviceptr* dptr, size_t bytes, Ctx* ctx) {
  if (dptr == nullptr || bytes == 0 || p == nullptr || p->destroyed)
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t need = RoundUp(bytes, 512);
  if (p->reserved - p->used < need) {
    uint64_t grow = RoundUp(need - (p->reserved - p->used), d.conf.pool_chunk);
    if (p->max_size != 0 && p->reserved + grow > p->max_size) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!d.Take(p->dev, grow)) return CUDA_ERROR_OUT_OF_MEMORY;
    p->reserved += grow;
  }
  p->used += need;
  p->reserved_high = std::max(p->reserved_high, p->reserved);
  p->used_high = std::max(p->used_high, p->used);
  *dptr = d.Va(bytes);
  d.ptrs[*dptr] = PtrObj{ObjKind::kPoolPtr, p->dev, 0, bytes, ctx, p};
  return CUDA_SUCCESS;
}

CUresult PoolFree(Driver& d, CUdeviceptr ptr) {
  auto it = d.ptrs.find(ptr);
  if (it == d.ptrs.end()) return CUDA_ERROR_INVALID_VALUE;
  if (it->second.kind == ObjKind::kLinear) {
    d.Give(it->second.dev, it->second.bytes);  // cuMemFreeAsync accepts cuMemAlloc pointers
  } else if (it->second.kind == ObjKind::kPoolPtr) {
    Pool* p = it->second.pool;
    p->used -= std::min(p->used, RoundUp(it->second.size, 512));
    if (p->destroyed && p->used == 0) {
      d.Give(p->dev, p->reserved);
      p->reserved = 0;
    }
  }
  d.ptrs.erase(it);
  return CUDA_SUCCESS;
}

CUresult Launch(CUfunction f, CUstream s) {
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  Ctx* c = Current();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  uint64_t ns = f != nullptr ? reinterpret_cast<Func*>(f)->ns : d.conf.kernel_ns;
  Stream& st = StreamOf(d, s);
  uint64_t start = std::max(NowNs(), st.tail);
  st.tail = start + ns;
  d.busy_ns[c->dev] += ns;
  return CUDA_SUCCESS;
}

CUresult CreateCtx(CUcontext* pctx, CUdevice dev) {
  Driver& d = D();
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  if (!d.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= d.conf.devices) return CUDA_ERROR_INVALID_DEVICE;
  if (!d.Take(dev, d.conf.context_overhead)) return CUDA_ERROR_OUT_OF_MEMORY;
  Ctx* c = new Ctx{dev, false, d.conf.context_overhead};
  d.contexts.push_back(c);
  t_ctx_stack.push_back(c);
  *pctx = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}

CUresult DestroyCtx(CUcontext ctx) {
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  Ctx* c = reinterpret_cast<Ctx*>(ctx);
  auto it = std::find(d.contexts.begin(), d.contexts.end(), c);
  if (it == d.contexts.end() || c->primary) return CUDA_ERROR_INVALID_CONTEXT;
  FreeContextObjectsLocked(d, c);
  d.Give(c->dev, c->overhead);
  d.contexts.erase(it);
  t_ctx_stack.erase(std::remove(t_ctx_stack.begin(), t_ctx_stack.end(), c), t_ctx_stack.end());
  delete c;
  return CUDA_SUCCESS;
}

CUresult ReleasePrimary(CUdevice dev) {
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  if (dev < 0 || dev >= d.conf.devices) return CUDA_ERROR_INVALID_DEVICE;
  if (d.primary_refs[dev] == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--d.primary_refs[dev] == 0) {
    Ctx* c = d.primary[dev];
    FreeContextObjectsLocked(d, c);
    d.Give(dev, c->overhead);
    t_ctx_stack.erase(std::remove(t_ctx_stack.begin(), t_ctx_stack.end(), c), t_ctx_stack.end());
    d.contexts.erase(std::remove(d.contexts.begin(), d.contexts.end(), c), d.contexts.end());
    delete c;
    d.primary[dev] = nullptr;
  }
  return CUDA_SUCCESS;
}

CUresult ResetPrimary(CUdevice dev) {
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  if (dev < 0 || dev >= d.conf.devices) return CUDA_ERROR_INVALID_DEVICE;
  if (d.primary[dev] != nullptr) FreeContextObjectsLocked(d, d.primary[dev]);
  return CUDA_SUCCESS;
}

template <typename Ptr, typename Size>
CUresult AllocLinear(Ptr* dptr, Size bytes) {
  Driver& d = D();
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  Ctx* c = Current();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  uint64_t fp = d.LinearFootprint(bytes);
  if (!d.Take(c->dev, fp)) return CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t p = d.Va(bytes);
  d.ptrs[p] = PtrObj{ObjKind::kLinear, c->dev, fp, static_cast<uint64_t>(bytes), c, nullptr};
  *dptr = static_cast<Ptr>(p);
  return CUDA_SUCCESS;
}

CUresult FreeLinear(uint64_t ptr) {
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  if (ptr == 0) return CUDA_SUCCESS;
  auto it = d.ptrs.find(ptr);
  if (it == d.ptrs.end() || it->second.kind == ObjKind::kIpc) return CUDA_ERROR_INVALID_VALUE;
  if (it->second.kind == ObjKind::kPoolPtr) return PoolFree(d, ptr);  // cuMemFree accepts them
  d.Give(it->second.dev, it->second.bytes);
  d.ptrs.erase(it);
  return CUDA_SUCCESS;
}

template <typename Ptr, typename Size>
CUresult AllocPitch(Ptr* dptr, Size* pitch, Size width, Size height) {
  Driver& d = D();
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0)
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  Ctx* c = Current();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  uint64_t p = RoundUp(width, d.conf.pitch_align);
  uint64_t fp = d.LinearFootprint(p * height);
  if (!d.Take(c->dev, fp)) return CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t va = d.Va(p * height);
  d.ptrs[va] = PtrObj{ObjKind::kLinear, c->dev, fp, p * height, c, nullptr};
  *dptr = static_cast<Ptr>(va);
  *pitch = static_cast<Size>(p);
  return CUDA_SUCCESS;
}

CUresult CreateArray(CUarray* handle, uint64_t w, uint64_t h, uint64_t depth, int format,
                     unsigned ch, unsigned flags) {
  Driver& d = D();
  if (handle == nullptr || w == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  Ctx* c = Current();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  bool sparse = (flags & 0xc0u) != 0;
  uint64_t fp = sparse ? 0 : ArrayFootprint(w, h, depth, format, ch) + d.conf.array_pad;
  if (!d.Take(c->dev, fp)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* key = reinterpret_cast<void*>(d.Va(64));
  d.handles[key] = HandleObj{c->dev, fp, c};
  *handle = reinterpret_cast<CUarray>(key);
  return CUDA_SUCCESS;
}

CUresult DestroyHandle(void* h) {
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  auto it = d.handles.find(h);
  if (it == d.handles.end()) return CUDA_ERROR_INVALID_HANDLE;
  d.Give(it->second.dev, it->second.bytes);
  d.handles.erase(it);
  return CUDA_SUCCESS;
}

CUresult FreeVmmIfUnused(Driver& d, uint64_t handle) {
  auto it = d.vmm.find(handle);
  if (it == d.vmm.end()) return CUDA_ERROR_INVALID_VALUE;
  if (it->second.refs == 0 && it->second.maps == 0) {
    auto ph = d.vmm_phys.find(it->second.physical_id);
    if (ph != d.vmm_phys.end() && --ph->second.holders == 0) {
      d.Give(ph->second.dev, ph->second.size);
      d.vmm_phys.erase(ph);
    }
    d.vmm.erase(it);
  }
  return CUDA_SUCCESS;
}

// ---- cuGetProcAddress: an independent (linear) reading of the generated table
// ---------------------
struct Entry {
  const char* base;
  int version;
  int per_thread;
  const char* exported;
};
const Entry kEntries[] = {
#define GPUSHARE_CUDA_ENTRY(base, version, pt, exported) {#base, version, pt, #exported},
#include "interpose/generated/cuda_entry_points.inc"
#undef GPUSHARE_CUDA_ENTRY
};

}  // namespace

extern "C" {
struct fakecuda_export {
  const char* name;
  void* fn;
};
extern const struct fakecuda_export fakecuda_exports[];

int fakecuda_unimplemented(const char* name) {
  int i = ExportIndex(name);
  if (i >= 0) g_calls[i].fetch_add(1, std::memory_order_relaxed);
  return CUDA_ERROR_NOT_SUPPORTED;
}
}

namespace {
void* ExportedPointer(const char* name) {
  for (const fakecuda_export* e = fakecuda_exports; e->name != nullptr; ++e)
    if (strcmp(e->name, name) == 0) return e->fn;
  return nullptr;
}

CUresult GetProc(const char* symbol, void** pfn, int version, cuuint64_t flags, int* status) {
  Driver& d = D();
  if (pfn == nullptr || symbol == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  if (version > d.conf.driver_version) return CUDA_ERROR_INVALID_VALUE;
  const Entry* legacy = nullptr;
  const Entry* pt = nullptr;
  bool known = false;
  for (const Entry& e : kEntries) {
    if (strcmp(e.base, symbol) != 0) continue;
    known = true;
    if (e.version > version) continue;
    const Entry*& slot = e.per_thread ? pt : legacy;
    if (slot == nullptr || e.version >= slot->version) slot = &e;
  }
  const Entry* chosen = legacy;
  if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0 && pt != nullptr &&
      legacy != nullptr) {
    std::string base(legacy->exported);
    if (pt->exported == base + "_ptsz" || pt->exported == base + "_ptds") chosen = pt;
  }
  if (chosen == nullptr) {
    if (status != nullptr)
      *status =
          known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
  }
  *pfn = ExportedPointer(chosen->exported);
  if (status != nullptr)
    *status = *pfn != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_SUCCESS;
}

}  // namespace

#define EXPORT extern "C" __attribute__((visibility("default")))
// An export that only counts the call and forwards (the ABI variants sharing one implementation).
#define FAKE_FORWARD(name, params, call) \
  EXPORT CUresult name params {          \
    FAKE_ENTER(name);                    \
    return call;                         \
  }

// ---- control API
// ---------------------------------------------------------------------------------
EXPORT uint64_t fakecuda_physical_used(int dev) {
  return D().phys.Total(dev);
}
EXPORT uint64_t fakecuda_process_used(int dev) {
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  return d.phys.local_used[dev];
}
EXPORT uint64_t fakecuda_high_water(int dev) {
  return D().phys.High(dev);
}
EXPORT void fakecuda_reset_high_water(void) {
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  d.phys.ResetHigh();
}
EXPORT uint64_t fakecuda_calls(const char* name) {
  int i = ExportIndex(name);
  return i < 0 ? 0 : g_calls[i].load();
}
EXPORT uint64_t fakecuda_live_objects(void) {
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  return d.ptrs.size() + d.handles.size() + d.vmm.size();
}
EXPORT void fakecuda_fail_next(const char* name, int count, int result) {
  int i = ExportIndex(name);
  if (i < 0) return;
  g_fail[i].result.store(result);
  g_fail[i].remaining.store(count);
}
EXPORT uint64_t fakecuda_busy_ns(int dev) {
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  return d.busy_ns[dev];
}

// ---- initialisation and devices
// ------------------------------------------------------------------
EXPORT CUresult cuInit(unsigned int flags) {
  FAKE_ENTER(cuInit);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  d.initialised = true;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDriverGetVersion(int* v) {
  FAKE_ENTER(cuDriverGetVersion);
  if (v == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *v = D().conf.driver_version;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetCount(int* n) {
  FAKE_ENTER(cuDeviceGetCount);
  if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!D().initialised) return CUDA_ERROR_NOT_INITIALIZED;
  *n = D().conf.devices;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  FAKE_ENTER(cuDeviceGet);
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!D().initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= D().conf.devices) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  FAKE_ENTER(cuDeviceGetName);
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= D().conf.devices) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, static_cast<size_t>(len), "Fake GPU %d", dev);
  return CUDA_SUCCESS;
}
static CUresult GetUuid(CUuuid* u, CUdevice dev) {
  if (u == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!D().initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= D().conf.devices) return CUDA_ERROR_INVALID_DEVICE;
  memcpy(u->bytes, D().conf.dev[dev].uuid, 16);
  return CUDA_SUCCESS;
}
FAKE_FORWARD(cuDeviceGetUuid, (CUuuid * u, CUdevice dev), GetUuid(u, dev))
FAKE_FORWARD(cuDeviceGetUuid_v2, (CUuuid * u, CUdevice dev), GetUuid(u, dev))
EXPORT CUresult cuDeviceGetAttribute(int* v, int attr, CUdevice dev) {
  FAKE_ENTER(cuDeviceGetAttribute);
  if (v == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= D().conf.devices) return CUDA_ERROR_INVALID_DEVICE;
  if (attr == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
    *v = D().conf.sm_count;
  else if (attr == CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)
    *v = 2048;
  else
    *v = 0;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  FAKE_ENTER(cuDeviceTotalMem_v2);
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= D().conf.devices) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = D().conf.dev[dev].total;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  FAKE_ENTER(cuDeviceTotalMem);
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= D().conf.devices) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = static_cast<unsigned int>(std::min<uint64_t>(D().conf.dev[dev].total, 0xffffffffu));
  return CUDA_SUCCESS;
}
EXPORT CUresult cuGetErrorString(CUresult e, const char** s) {
  FAKE_ENTER(cuGetErrorString);
  if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *s = e == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : "fake error";
  return CUDA_SUCCESS;
}
EXPORT CUresult cuGetErrorName(CUresult e, const char** s) {
  FAKE_ENTER(cuGetErrorName);
  if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *s = e == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_UNKNOWN";
  return CUDA_SUCCESS;
}

// ---- entry points
// --------------------------------------------------------------------------------
FAKE_FORWARD(cuGetProcAddress_v2,
             (const char* symbol, void** pfn, int version, cuuint64_t flags,
              CUdriverProcAddressQueryResult* status),
             GetProc(symbol, pfn, version, flags, status))
FAKE_FORWARD(cuGetProcAddress, (const char* symbol, void** pfn, int version, cuuint64_t flags),
             GetProc(symbol, pfn, version, flags, nullptr))

// ---- contexts
// ------------------------------------------------------------------------------------
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  FAKE_ENTER(cuDevicePrimaryCtxRetain);
  Driver& d = D();
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  if (!d.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= d.conf.devices) return CUDA_ERROR_INVALID_DEVICE;
  if (d.primary[dev] == nullptr) {
    if (!d.Take(dev, d.conf.context_overhead)) return CUDA_ERROR_OUT_OF_MEMORY;
    d.primary[dev] = new Ctx{dev, true, d.conf.context_overhead};
    d.contexts.push_back(d.primary[dev]);
  }
  ++d.primary_refs[dev];
  *pctx = reinterpret_cast<CUcontext>(d.primary[dev]);
  return CUDA_SUCCESS;
}
FAKE_FORWARD(cuDevicePrimaryCtxRelease, (CUdevice dev), ReleasePrimary(dev))
FAKE_FORWARD(cuDevicePrimaryCtxRelease_v2, (CUdevice dev), ReleasePrimary(dev))
FAKE_FORWARD(cuDevicePrimaryCtxReset, (CUdevice dev), ResetPrimary(dev))
FAKE_FORWARD(cuDevicePrimaryCtxReset_v2, (CUdevice dev), ResetPrimary(dev))
FAKE_FORWARD(cuCtxCreate, (CUcontext * pctx, unsigned int, CUdevice dev), CreateCtx(pctx, dev))
FAKE_FORWARD(cuCtxCreate_v2, (CUcontext * pctx, unsigned int, CUdevice dev), CreateCtx(pctx, dev))
FAKE_FORWARD(cuCtxCreate_v3, (CUcontext * pctx, void*, int, unsigned int, CUdevice dev),
             CreateCtx(pctx, dev))
FAKE_FORWARD(cuCtxCreate_v4, (CUcontext * pctx, void*, unsigned int, CUdevice dev),
             CreateCtx(pctx, dev))
FAKE_FORWARD(cuCtxDestroy, (CUcontext ctx), DestroyCtx(ctx))
FAKE_FORWARD(cuCtxDestroy_v2, (CUcontext ctx), DestroyCtx(ctx))
EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx) {
  FAKE_ENTER(cuCtxGetCurrent);
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = reinterpret_cast<CUcontext>(Current());
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  FAKE_ENTER(cuCtxSetCurrent);
  if (!t_ctx_stack.empty()) t_ctx_stack.pop_back();
  if (ctx != nullptr) t_ctx_stack.push_back(reinterpret_cast<Ctx*>(ctx));
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  FAKE_ENTER(cuCtxPushCurrent_v2);
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  t_ctx_stack.push_back(reinterpret_cast<Ctx*>(ctx));
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  FAKE_ENTER(cuCtxPopCurrent_v2);
  if (t_ctx_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx != nullptr) *pctx = reinterpret_cast<CUcontext>(t_ctx_stack.back());
  t_ctx_stack.pop_back();
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxGetDevice(CUdevice* dev) {
  FAKE_ENTER(cuCtxGetDevice);
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Ctx* c = Current();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (D().conf.ctx_device_fails_off_main_thread &&
      static_cast<pid_t>(syscall(SYS_gettid)) != D().main_tid)
    return CUDA_ERROR_INVALID_CONTEXT;
  *dev = c->dev;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxGetDevice_v2(CUdevice* dev, CUcontext ctx) {
  FAKE_ENTER(cuCtxGetDevice_v2);
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Ctx* c = ctx != nullptr ? reinterpret_cast<Ctx*>(ctx) : Current();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = c->dev;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxSynchronize(void) {
  FAKE_ENTER(cuCtxSynchronize);
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  if (Current() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  SyncPointLocked(d);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxSynchronize_v2(CUcontext) {
  FAKE_ENTER(cuCtxSynchronize_v2);
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  SyncPointLocked(d);
  return CUDA_SUCCESS;
}

// ---- linear memory
// -------------------------------------------------------------------------------
FAKE_FORWARD(cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytes), AllocLinear(dptr, bytes))
FAKE_FORWARD(cuMemAlloc, (unsigned int* dptr, unsigned int bytes), AllocLinear(dptr, bytes))
FAKE_FORWARD(cuMemFree_v2, (CUdeviceptr p), FreeLinear(p))
FAKE_FORWARD(cuMemFree, (unsigned int p), FreeLinear(p))
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t w, size_t h,
                                   unsigned int elem) {
  FAKE_ENTER(cuMemAllocPitch_v2);
  if (elem != 4 && elem != 8 && elem != 16) return CUDA_ERROR_INVALID_VALUE;
  return AllocPitch(dptr, pitch, w, h);
}
EXPORT CUresult cuMemAllocPitch(unsigned int* dptr, unsigned int* pitch, unsigned int w,
                                unsigned int h, unsigned int elem) {
  FAKE_ENTER(cuMemAllocPitch);
  if (elem != 4 && elem != 8 && elem != 16) return CUDA_ERROR_INVALID_VALUE;
  return AllocPitch(dptr, pitch, w, h);
}
EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  FAKE_ENTER(cuMemAllocManaged);
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != 2) return CUDA_ERROR_INVALID_VALUE;
  return AllocLinear(dptr, bytes);
}
static CUresult MemInfo(uint64_t* f, uint64_t* t) {
  Driver& d = D();
  Ctx* c = Current();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  uint64_t total = d.conf.dev[c->dev].total;
  uint64_t used = d.phys.Total(c->dev);
  *t = total;
  *f = used >= total ? 0 : total - used;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemGetInfo_v2(size_t* f, size_t* t) {
  FAKE_ENTER(cuMemGetInfo_v2);
  if (f == nullptr || t == nullptr) return CUDA_ERROR_INVALID_VALUE;
  uint64_t ff, tt;
  CUresult r = MemInfo(&ff, &tt);
  if (r == CUDA_SUCCESS) {
    *f = ff;
    *t = tt;
  }
  return r;
}
EXPORT CUresult cuMemGetInfo(unsigned int* f, unsigned int* t) {
  FAKE_ENTER(cuMemGetInfo);
  if (f == nullptr || t == nullptr) return CUDA_ERROR_INVALID_VALUE;
  uint64_t ff, tt;
  CUresult r = MemInfo(&ff, &tt);
  if (r == CUDA_SUCCESS) {
    *f = static_cast<unsigned int>(std::min<uint64_t>(ff, 0xffffffffu));
    *t = static_cast<unsigned int>(std::min<uint64_t>(tt, 0xffffffffu));
  }
  return r;
}
EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  FAKE_ENTER(cuMemGetAddressRange_v2);
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  auto it = d.ptrs.find(p);
  if (it == d.ptrs.end()) return CUDA_ERROR_NOT_FOUND;
  if (base != nullptr) *base = p;
  if (size != nullptr) *size = it->second.size;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuPointerGetAttribute(void* data, int attr, CUdeviceptr p) {
  FAKE_ENTER(cuPointerGetAttribute);
  Driver& d = D();
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  auto it = d.ptrs.find(p);
  if (it == d.ptrs.end()) return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = it->second.dev;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<void**>(data) = it->second.ctx;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = it->second.size;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      *static_cast<void**>(data) = it->second.pool;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// ---- arrays
// --------------------------------------------------------------------------------------
EXPORT CUresult cuArrayCreate_v2(CUarray* h, const CUDA_ARRAY_DESCRIPTOR* desc) {
  FAKE_ENTER(cuArrayCreate_v2);
  if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CreateArray(h, desc->Width, desc->Height, 1, desc->Format, desc->NumChannels, 0);
}
EXPORT CUresult cuArrayCreate(CUarray* h, const CUDA_ARRAY_DESCRIPTOR_v1* desc) {
  FAKE_ENTER(cuArrayCreate);
  if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CreateArray(h, desc->Width, desc->Height, 1, desc->Format, desc->NumChannels, 0);
}
EXPORT CUresult cuArray3DCreate_v2(CUarray* h, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  FAKE_ENTER(cuArray3DCreate_v2);
  if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CreateArray(h, desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels,
                     desc->Flags);
}
EXPORT CUresult cuArray3DCreate(CUarray* h, const CUDA_ARRAY3D_DESCRIPTOR_v1* desc) {
  FAKE_ENTER(cuArray3DCreate);
  if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CreateArray(h, desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels,
                     desc->Flags);
}
FAKE_FORWARD(cuArrayDestroy, (CUarray h), DestroyHandle(h))
static CUresult MemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* req, void* h) {
  Driver& d = D();
  if (req == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  auto it = d.handles.find(h);
  if (it == d.handles.end()) return CUDA_ERROR_INVALID_HANDLE;
  memset(req, 0, sizeof(*req));
  req->size = it->second.bytes;
  req->alignment = 512;
  return CUDA_SUCCESS;
}
FAKE_FORWARD(cuArrayGetMemoryRequirements,
             (CUDA_ARRAY_MEMORY_REQUIREMENTS * req, CUarray h, CUdevice),
             MemoryRequirements(req, h))
EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* h, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                       unsigned int levels) {
  FAKE_ENTER(cuMipmappedArrayCreate);
  Driver& d = D();
  if (h == nullptr || desc == nullptr || levels == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  Ctx* c = Current();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  uint64_t fp = 0;
  if ((desc->Flags & 0xc0u) == 0) {
    for (unsigned lv = 0; lv < levels; ++lv)
      fp += ArrayFootprint(
          std::max<uint64_t>(desc->Width >> lv, 1), std::max<uint64_t>(desc->Height >> lv, 1),
          std::max<uint64_t>(desc->Depth >> lv, 1), desc->Format, desc->NumChannels);
    fp = RoundUp(fp, d.conf.granularity);
  }
  if (!d.Take(c->dev, fp)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* key = reinterpret_cast<void*>(d.Va(64));
  d.handles[key] = HandleObj{c->dev, fp, c};
  *h = reinterpret_cast<CUmipmappedArray>(key);
  return CUDA_SUCCESS;
}
FAKE_FORWARD(cuMipmappedArrayDestroy, (CUmipmappedArray h), DestroyHandle(h))
FAKE_FORWARD(cuMipmappedArrayGetMemoryRequirements,
             (CUDA_ARRAY_MEMORY_REQUIREMENTS * req, CUmipmappedArray h, CUdevice),
             MemoryRequirements(req, h))

// ---- stream-ordered allocation and pools
// ---------------------------------------------------------
static CUresult AllocAsyncImpl(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool) {
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  Ctx* c = Current();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  Pool* p = pool != nullptr ? reinterpret_cast<Pool*>(pool) : nullptr;
  if (p == nullptr) {
    DefaultPool(d, c->dev);
    p = d.current_pool[c->dev];
  } else if (std::find(d.pools.begin(), d.pools.end(), p) == d.pools.end()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return PoolAlloc(d, p, dptr, bytes, c);
}
FAKE_FORWARD(cuMemAllocAsync, (CUdeviceptr * dptr, size_t bytes, CUstream),
             AllocAsyncImpl(dptr, bytes, nullptr))
FAKE_FORWARD(cuMemAllocAsync_ptsz, (CUdeviceptr * dptr, size_t bytes, CUstream),
             AllocAsyncImpl(dptr, bytes, nullptr))
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                        CUstream) {
  FAKE_ENTER(cuMemAllocFromPoolAsync);
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AllocAsyncImpl(dptr, bytes, pool);
}
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                             CUstream) {
  FAKE_ENTER(cuMemAllocFromPoolAsync_ptsz);
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AllocAsyncImpl(dptr, bytes, pool);
}
static CUresult FreeAsyncImpl(CUdeviceptr p) {
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  return PoolFree(d, p);
}
FAKE_FORWARD(cuMemFreeAsync, (CUdeviceptr p, CUstream), FreeAsyncImpl(p))
FAKE_FORWARD(cuMemFreeAsync_ptsz, (CUdeviceptr p, CUstream), FreeAsyncImpl(p))
EXPORT CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  FAKE_ENTER(cuMemPoolCreate);
  Driver& d = D();
  if (pool == nullptr || props == nullptr || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      props->location.id < 0 || props->location.id >= d.conf.devices)
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  Pool* p = new Pool();
  p->dev = props->location.id;
  p->max_size = props->maxSize;
  d.pools.push_back(p);
  *pool = reinterpret_cast<CUmemoryPool>(p);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  FAKE_ENTER(cuMemPoolDestroy);
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  Pool* p = reinterpret_cast<Pool*>(pool);
  if (std::find(d.pools.begin(), d.pools.end(), p) == d.pools.end() || p == d.default_pool[p->dev])
    return CUDA_ERROR_INVALID_VALUE;
  p->destroyed = true;
  if (p->used == 0) {  // otherwise released with the last outstanding allocation
    d.Give(p->dev, p->reserved);
    p->reserved = 0;
  }
  if (d.current_pool[p->dev] == p) d.current_pool[p->dev] = d.default_pool[p->dev];
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  FAKE_ENTER(cuMemPoolTrimTo);
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  Pool* p = reinterpret_cast<Pool*>(pool);
  if (std::find(d.pools.begin(), d.pools.end(), p) == d.pools.end())
    return CUDA_ERROR_INVALID_VALUE;
  ReleasePoolExcessLocked(d, p, keep);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void* value) {
  FAKE_ENTER(cuMemPoolSetAttribute);
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  Pool* p = reinterpret_cast<Pool*>(pool);
  if (value == nullptr || std::find(d.pools.begin(), d.pools.end(), p) == d.pools.end())
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t v = *static_cast<uint64_t*>(value);
  if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
    p->threshold = v;
  else if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH && v == 0)
    p->reserved_high = p->reserved;
  else if (attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH && v == 0)
    p->used_high = p->used;
  else if (attr >= 1 && attr <= 3) {
  } else
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void* value) {
  FAKE_ENTER(cuMemPoolGetAttribute);
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  Pool* p = reinterpret_cast<Pool*>(pool);
  if (value == nullptr || std::find(d.pools.begin(), d.pools.end(), p) == d.pools.end())
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t* out = static_cast<uint64_t*>(value);
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      *out = p->threshold;
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
      *out = p->reserved;
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      *out = p->reserved_high;
      break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      *out = p->used;
      break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      *out = p->used_high;
      break;
    default:
      *static_cast<int*>(value) = 1;
  }
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  FAKE_ENTER(cuDeviceGetDefaultMemPool);
  Driver& d = D();
  if (pool == nullptr || dev < 0 || dev >= d.conf.devices) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  *pool = reinterpret_cast<CUmemoryPool>(DefaultPool(d, dev));
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  FAKE_ENTER(cuDeviceGetMemPool);
  Driver& d = D();
  if (pool == nullptr || dev < 0 || dev >= d.conf.devices) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  DefaultPool(d, dev);
  *pool = reinterpret_cast<CUmemoryPool>(d.current_pool[dev]);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  FAKE_ENTER(cuDeviceSetMemPool);
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  Pool* p = reinterpret_cast<Pool*>(pool);
  if (dev < 0 || dev >= d.conf.devices ||
      std::find(d.pools.begin(), d.pools.end(), p) == d.pools.end() || p->dev != dev)
    return CUDA_ERROR_INVALID_VALUE;
  DefaultPool(d, dev);
  d.current_pool[dev] = p;
  return CUDA_SUCCESS;
}

// ---- virtual memory management
// -------------------------------------------------------------------
EXPORT CUresult cuMemGetAllocationGranularity(size_t* g, const CUmemAllocationProp* prop, int) {
  FAKE_ENTER(cuMemGetAllocationGranularity);
  if (g == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *g = D().conf.granularity;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                            const CUmemAllocationProp* prop, unsigned long long flags) {
  FAKE_ENTER(cuMemCreate);
  Driver& d = D();
  if (handle == nullptr || prop == nullptr || flags != 0 || size == 0 ||
      size % d.conf.granularity != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
      prop->location.id >= d.conf.devices)
    return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> l(d.mu);
  if (!d.Take(prop->location.id, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t id = d.next_handle++;
  d.vmm_phys[id] = Physical_{prop->location.id, size, 1};
  PhysHandle h;
  h.dev = prop->location.id;
  h.size = size;
  h.physical_id = id;
  *handle = 0x1000 + id;
  d.vmm[*handle] = h;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  FAKE_ENTER(cuMemRelease);
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  auto it = d.vmm.find(handle);
  if (it == d.vmm.end() || it->second.refs == 0) return CUDA_ERROR_INVALID_VALUE;
  --it->second.refs;
  return FreeVmmIfUnused(d, handle);
}
EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t align, CUdeviceptr,
                                    unsigned long long) {
  FAKE_ENTER(cuMemAddressReserve);
  Driver& d = D();
  if (ptr == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  *ptr = d.Va(size, std::max<uint64_t>(align, d.conf.granularity));
  return CUDA_SUCCESS;
}
FAKE_FORWARD(cuMemAddressFree, (CUdeviceptr, size_t), CUDA_SUCCESS)
EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags) {
  FAKE_ENTER(cuMemMap);
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  auto it = d.vmm.find(handle);
  if (it == d.vmm.end() || flags != 0 || offset + size > it->second.size ||
      d.mappings.count(ptr) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  ++it->second.maps;
  d.mappings[ptr] = Mapping{handle, size};
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  FAKE_ENTER(cuMemUnmap);
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  CUdeviceptr at = ptr;
  if (d.mappings.count(ptr) == 0) return CUDA_ERROR_INVALID_VALUE;
  while (at < ptr + size) {
    auto m = d.mappings.find(at);
    if (m == d.mappings.end()) break;
    Mapping mp = m->second;
    d.mappings.erase(m);
    auto h = d.vmm.find(mp.handle);
    if (h != d.vmm.end()) {
      --h->second.maps;
      FreeVmmIfUnused(d, mp.handle);
    }
    at += mp.size;
  }
  return CUDA_SUCCESS;
}
FAKE_FORWARD(cuMemSetAccess, (CUdeviceptr, size_t, const CUmemAccessDesc*, size_t), CUDA_SUCCESS)
EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  FAKE_ENTER(cuMemRetainAllocationHandle);
  Driver& d = D();
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  uint64_t a = reinterpret_cast<uint64_t>(addr);
  auto m = d.mappings.upper_bound(a);
  if (m == d.mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
  --m;
  if (a >= m->first + m->second.size) return CUDA_ERROR_INVALID_VALUE;
  ++d.vmm[m->second.handle].refs;
  *handle = m->second.handle;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemExportToShareableHandle(void* os_handle, CUmemGenericAllocationHandle handle,
                                             int, unsigned long long) {
  FAKE_ENTER(cuMemExportToShareableHandle);
  Driver& d = D();
  if (os_handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  auto it = d.vmm.find(handle);
  if (it == d.vmm.end()) return CUDA_ERROR_INVALID_VALUE;
  int fd = static_cast<int>(1000 + it->second.physical_id);
  d.exported[static_cast<uint64_t>(fd)] = it->second.physical_id;
  *static_cast<int*>(os_handle) = fd;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle,
                                               void* os_handle, int) {
  FAKE_ENTER(cuMemImportFromShareableHandle);
  Driver& d = D();
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  // The fake can only import what this process exported (the shareable handle is the fd value).
  uint64_t fd = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(os_handle));
  auto e = d.exported.find(fd);
  if (e == d.exported.end()) return CUDA_ERROR_INVALID_VALUE;
  auto ph = d.vmm_phys.find(e->second);
  if (ph == d.vmm_phys.end()) return CUDA_ERROR_INVALID_VALUE;
  ++ph->second.holders;
  PhysHandle h;
  h.dev = ph->second.dev;
  h.size = ph->second.size;
  h.physical_id = e->second;
  *handle = 0x1000 + d.next_handle++;
  d.vmm[*handle] = h;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                       CUmemGenericAllocationHandle handle) {
  FAKE_ENTER(cuMemGetAllocationPropertiesFromHandle);
  Driver& d = D();
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  auto it = d.vmm.find(handle);
  if (it == d.vmm.end()) return CUDA_ERROR_INVALID_VALUE;
  memset(prop, 0, sizeof(*prop));
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = it->second.dev;
  return CUDA_SUCCESS;
}

// ---- IPC and external memory
// ---------------------------------------------------------------------
EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle* h, CUdeviceptr p) {
  FAKE_ENTER(cuIpcGetMemHandle);
  Driver& d = D();
  if (h == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  auto it = d.ptrs.find(p);
  if (it == d.ptrs.end()) return CUDA_ERROR_INVALID_VALUE;
  memset(h, 0, sizeof(*h));
  uint64_t fields[3] = {p, it->second.size, static_cast<uint64_t>(it->second.dev)};
  memcpy(h->reserved, fields, sizeof(fields));
  return CUDA_SUCCESS;
}
static CUresult OpenIpcImpl(CUdeviceptr* out, CUipcMemHandle h) {
  Driver& d = D();
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  Ctx* c = Current();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  uint64_t fields[3];
  memcpy(fields, h.reserved, sizeof(fields));
  if (fields[1] == 0) return CUDA_ERROR_INVALID_VALUE;
  *out = d.Va(fields[1]);
  d.ptrs[*out] = PtrObj{ObjKind::kIpc, static_cast<int>(fields[2]), 0, fields[1], c, nullptr};
  return CUDA_SUCCESS;
}
FAKE_FORWARD(cuIpcOpenMemHandle, (CUdeviceptr * out, CUipcMemHandle h, unsigned int),
             OpenIpcImpl(out, h))
FAKE_FORWARD(cuIpcOpenMemHandle_v2, (CUdeviceptr * out, CUipcMemHandle h, unsigned int),
             OpenIpcImpl(out, h))
EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
  FAKE_ENTER(cuIpcCloseMemHandle);
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  auto it = d.ptrs.find(p);
  if (it == d.ptrs.end() || it->second.kind != ObjKind::kIpc) return CUDA_ERROR_INVALID_VALUE;
  d.ptrs.erase(it);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuImportExternalMemory(CUexternalMemory* out,
                                       const CUDA_EXTERNAL_MEMORY_HANDLE_DESC* desc) {
  FAKE_ENTER(cuImportExternalMemory);
  Driver& d = D();
  if (out == nullptr || desc == nullptr || desc->size == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  Ctx* c = Current();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  // The memory belongs to another API (Vulkan, ...) on this GPU: it occupies the device already.
  uint64_t fp = d.LinearFootprint(desc->size);
  if (!d.Take(c->dev, fp)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* key = reinterpret_cast<void*>(d.Va(64));
  d.handles[key] = HandleObj{c->dev, fp, c};
  *out = reinterpret_cast<CUexternalMemory>(key);
  return CUDA_SUCCESS;
}
FAKE_FORWARD(cuDestroyExternalMemory, (CUexternalMemory ext), DestroyHandle(ext))

// ---- streams, events, launches
// -------------------------------------------------------------------
EXPORT CUresult cuStreamCreate(CUstream* s, unsigned int) {
  FAKE_ENTER(cuStreamCreate);
  Driver& d = D();
  if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  if (Current() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *s = reinterpret_cast<CUstream>(d.Va(64));
  d.streams[*s].ctx = Current();
  return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  FAKE_ENTER(cuStreamDestroy_v2);
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  d.streams.erase(reinterpret_cast<void*>(s));
  return CUDA_SUCCESS;
}
static CUresult StreamSync(CUstream s) {
  Driver& d = D();
  uint64_t tail;
  {
    std::lock_guard<std::mutex> l(d.mu);
    tail = StreamOf(d, s).tail;
  }
  uint64_t now = NowNs();
  if (tail > now) {
    timespec ts{static_cast<time_t>((tail - now) / 1000000000),
                static_cast<long>((tail - now) % 1000000000)};
    nanosleep(&ts, nullptr);
  }
  std::lock_guard<std::mutex> l(d.mu);
  SyncPointLocked(d);
  return CUDA_SUCCESS;
}
FAKE_FORWARD(cuStreamSynchronize, (CUstream s), StreamSync(s))
FAKE_FORWARD(cuStreamSynchronize_ptsz, (CUstream s), StreamSync(s))
EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, int) {
  FAKE_ENTER(cuStreamBeginCapture_v2);
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  StreamOf(d, s).capturing = true;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph* g) {
  FAKE_ENTER(cuStreamEndCapture);
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  StreamOf(d, s).capturing = false;
  if (g != nullptr) *g = reinterpret_cast<CUgraph>(new Graph());
  return CUDA_SUCCESS;
}
static CUresult IsCapturing(CUstream s, int* status) {
  Driver& d = D();
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  *status = StreamOf(d, s).capturing ? 1 : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
FAKE_FORWARD(cuStreamIsCapturing, (CUstream s, int* status), IsCapturing(s, status))
FAKE_FORWARD(cuStreamIsCapturing_ptsz, (CUstream s, int* status), IsCapturing(s, status))
EXPORT CUresult cuEventCreate(CUevent* e, unsigned int) {
  FAKE_ENTER(cuEventCreate);
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (Current() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *e = reinterpret_cast<CUevent>(new Event());
  return CUDA_SUCCESS;
}
EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  FAKE_ENTER(cuEventDestroy_v2);
  delete reinterpret_cast<Event*>(e);
  return CUDA_SUCCESS;
}
static CUresult RecordImpl(CUevent e, CUstream s) {
  Driver& d = D();
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> l(d.mu);
  Stream& st = StreamOf(d, s);
  Event* ev = reinterpret_cast<Event*>(e);
  ev->time = std::max(NowNs(), st.tail);
  ev->recorded = true;
  return CUDA_SUCCESS;
}
FAKE_FORWARD(cuEventRecord, (CUevent e, CUstream s), RecordImpl(e, s))
FAKE_FORWARD(cuEventRecord_ptsz, (CUevent e, CUstream s), RecordImpl(e, s))
EXPORT CUresult cuEventQuery(CUevent e) {
  FAKE_ENTER(cuEventQuery);
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  Event* ev = reinterpret_cast<Event*>(e);
  return NowNs() >= ev->time ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
EXPORT CUresult cuEventSynchronize(CUevent e) {
  FAKE_ENTER(cuEventSynchronize);
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  Event* ev = reinterpret_cast<Event*>(e);
  uint64_t now = NowNs();
  if (ev->time > now) {
    timespec ts{static_cast<time_t>((ev->time - now) / 1000000000),
                static_cast<long>((ev->time - now) % 1000000000)};
    nanosleep(&ts, nullptr);
  }
  Driver& d = D();
  std::lock_guard<std::mutex> l(d.mu);
  SyncPointLocked(d);
  return CUDA_SUCCESS;
}
static CUresult ElapsedImpl(float* ms, CUevent a, CUevent b) {
  if (ms == nullptr || a == nullptr || b == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Event* ea = reinterpret_cast<Event*>(a);
  Event* eb = reinterpret_cast<Event*>(b);
  if (!ea->recorded || !eb->recorded) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t now = NowNs();
  if (now < ea->time || now < eb->time) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>(static_cast<double>(static_cast<int64_t>(eb->time - ea->time)) / 1e6);
  return CUDA_SUCCESS;
}
FAKE_FORWARD(cuEventElapsedTime, (float* ms, CUevent a, CUevent b), ElapsedImpl(ms, a, b))
FAKE_FORWARD(cuEventElapsedTime_v2, (float* ms, CUevent a, CUevent b), ElapsedImpl(ms, a, b))
EXPORT CUresult cuModuleGetFunction(CUfunction* f, void*, const char* name) {
  FAKE_ENTER(cuModuleGetFunction);
  if (f == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  uint64_t ns = D().conf.kernel_ns;
  if (strncmp(name, "spin_", 5) == 0) ns = strtoull(name + 5, nullptr, 10);
  *f = reinterpret_cast<CUfunction>(new Func{ns});
  return CUDA_SUCCESS;
}
FAKE_FORWARD(cuLaunchKernel,
             (CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
              CUstream s, void**, void**),
             Launch(f, s))
FAKE_FORWARD(cuLaunchKernel_ptsz,
             (CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
              CUstream s, void**, void**),
             Launch(f, s))
EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* cfg, CUfunction f, void**, void**) {
  FAKE_ENTER(cuLaunchKernelEx);
  if (cfg == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Launch(f, cfg->hStream);
}
EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* cfg, CUfunction f, void**, void**) {
  FAKE_ENTER(cuLaunchKernelEx_ptsz);
  if (cfg == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Launch(f, cfg->hStream);
}
FAKE_FORWARD(cuLaunchCooperativeKernel,
             (CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
              CUstream s, void**),
             Launch(f, s))
FAKE_FORWARD(cuLaunchCooperativeKernel_ptsz,
             (CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
              CUstream s, void**),
             Launch(f, s))

// ---- graphs
// --------------------------------------------------------------------------------------
EXPORT CUresult cuGraphCreate(CUgraph* g, unsigned int) {
  FAKE_ENTER(cuGraphCreate);
  if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *g = reinterpret_cast<CUgraph>(new Graph());
  return CUDA_SUCCESS;
}
EXPORT CUresult cuGraphDestroy(CUgraph g) {
  FAKE_ENTER(cuGraphDestroy);
  delete reinterpret_cast<Graph*>(g);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph g, const CUgraphNode*, size_t,
                                       CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  FAKE_ENTER(cuGraphAddMemAllocNode);
  if (node == nullptr || g == nullptr || params == nullptr || params->bytesize == 0)
    return CUDA_ERROR_INVALID_VALUE;
  Graph* gr = reinterpret_cast<Graph*>(g);
  gr->alloc_bytes += RoundUp(params->bytesize, D().conf.granularity);
  gr->dev = params->poolProps.location.id;
  params->dptr = D().Va(params->bytesize);
  *node = reinterpret_cast<CUgraphNode>(gr);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph g, unsigned long long) {
  FAKE_ENTER(cuGraphInstantiateWithFlags);
  if (exec == nullptr || g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Graph* gr = reinterpret_cast<Graph*>(g);
  *exec = reinterpret_cast<CUgraphExec>(new GraphExec{gr->alloc_bytes, gr->dev});
  return CUDA_SUCCESS;
}
EXPORT CUresult cuGraphExecDestroy(CUgraphExec e) {
  FAKE_ENTER(cuGraphExecDestroy);
  delete reinterpret_cast<GraphExec*>(e);
  return CUDA_SUCCESS;
}
static CUresult GraphLaunchImpl(CUgraphExec e, CUstream s) {
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  GraphExec* ge = reinterpret_cast<GraphExec*>(e);
  {
    Driver& d = D();
    std::lock_guard<std::mutex> l(d.mu);
    // Graph allocations come from the device's graph pool, which keeps what it has grown to.
    if (ge->alloc_bytes > d.graph_reserved[ge->dev]) {
      uint64_t grow = ge->alloc_bytes - d.graph_reserved[ge->dev];
      if (!d.Take(ge->dev, grow)) return CUDA_ERROR_OUT_OF_MEMORY;
      d.graph_reserved[ge->dev] = ge->alloc_bytes;
    }
  }
  return Launch(nullptr, s);
}
FAKE_FORWARD(cuGraphLaunch, (CUgraphExec e, CUstream s), GraphLaunchImpl(e, s))
FAKE_FORWARD(cuGraphLaunch_ptsz, (CUgraphExec e, CUstream s), GraphLaunchImpl(e, s))
EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, int attr, void* value) {
  FAKE_ENTER(cuDeviceGetGraphMemAttribute);
  Driver& d = D();
  if (value == nullptr || dev < 0 || dev >= d.conf.devices) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(d.mu);
  uint64_t v =
      attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT || attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH
          ? d.graph_reserved[dev]
          : 0;
  *static_cast<uint64_t*>(value) = v;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGraphMemTrim(CUdevice dev) {
  FAKE_ENTER(cuDeviceGraphMemTrim);
  Driver& d = D();
  if (dev < 0 || dev >= d.conf.devices) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> l(d.mu);
  d.Give(dev, d.graph_reserved[dev]);
  d.graph_reserved[dev] = 0;
  return CUDA_SUCCESS;
}
