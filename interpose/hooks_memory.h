// interpose/hooks_memory.h: what the memory wrappers share (internal to the interposer). One
// file per API area: hooks_malloc.cc (linear memory), hooks_array.cc (arrays), hooks_async.cc
// (stream-ordered allocator, pools, graph memory), hooks_vmm.cc (virtual memory management),
// hooks_ipc.cc (IPC and external memory), hooks_context.cc (contexts), hooks_info.cc (queries).
//
// The memory wrappers cover every way a CUDA program obtains device memory, and the queries
// that report it. The pattern is always the same: work out the device, reserve the footprint
// atomically in the shared region (refusing with CUDA_ERROR_OUT_OF_MEMORY before the driver is
// called, so nothing is allocated), call the driver, then either give the reservation back (the
// driver failed) or record the allocation so that its free releases exactly what was charged. Where
// the real footprint is only known afterwards (pitch, array padding, pool growth) the
// reservation is adjusted to it, and an allocation whose real footprint does not fit is freed
// again before CUDA_ERROR_OUT_OF_MEMORY is returned. docs/interposer.md has the per-API policy.
#pragma once

#include <string.h>

#include "interpose/base.h"
#include "interpose/log.h"
#include "interpose/runtime.h"

namespace gpushare::interpose {

// Where an allocation is charged: the current context's device.
struct Target {
  CUcontext ctx = nullptr;
  int ordinal = -1;
  const OrdinalInfo* info = nullptr;
  bool accounted() const { return MemoryAccounted(info); }
  int dev() const { return info->dev; }
};

inline bool CurrentTarget(Target* t) {
  if (!Active()) return false;
  if (!CurrentContext(&t->ctx, &t->ordinal)) return false;
  t->info = Ordinal(t->ordinal);
  return t->accounted();
}

inline bool TargetForOrdinal(int ordinal, Target* t) {
  if (!Active()) return false;
  t->ordinal = ordinal;
  t->info = Ordinal(ordinal);
  CUcontext c = nullptr;
  int o = -1;
  if (CurrentContext(&c, &o) && o == ordinal) t->ctx = c;
  return t->accounted();
}

inline void Track(const AllocEntry& e) {
  LockLocal();
  bool ok = Table().Put(e);
  UnlockLocal();
  if (!ok)
    Log(kLogError,
        "msg=\"cannot record an allocation (out of memory for the table); it stays "
        "charged\" bytes=%llu",
        static_cast<unsigned long long>(e.bytes));
}

inline bool Untrack(AllocKind kind, uint64_t key, AllocEntry* out) {
  LockLocal();
  bool found = Table().Remove(kind, key, out);
  UnlockLocal();
  return found;
}

// Records an allocation charged to the target's device and context.
inline void TrackCharged(uint64_t key, AllocKind kind, const Target& t, uint64_t bytes) {
  AllocEntry e;
  e.key = key;
  e.kind = kind;
  e.dev = t.dev();
  e.bytes = bytes;
  e.ctx = reinterpret_cast<uint64_t>(t.ctx);
  Track(e);
}

// The driver freed it (or tore the context down): release the charge. Otherwise keep tracking.
inline void FinishFree(CUresult r, bool had, const AllocEntry& e) {
  if (!had) return;
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_DEINITIALIZED) {
    Unreserve(e.dev, e.bytes);
  } else {
    Track(e);
  }
}

// Grows or shrinks a reservation from `have` to `need`. False when growing does not fit.
inline bool Adjust(int dev, uint64_t have, uint64_t need, const char* api) {
  if (need > have) return Reserve(dev, need - have, api);
  Unreserve(dev, have - need);
  return true;
}

// When there was no context to charge but the driver allocated anyway, charge the pointer's
// device after the fact (never leave an allocation uncounted).
inline void ChargeOrphan(CUdeviceptr ptr, uint64_t bytes) {
  auto attr = Real<CUresult (*)(void*, int, CUdeviceptr)>(kFn_cuPointerGetAttribute);
  int ordinal = -1;
  if (!Active() || attr == nullptr ||
      attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr) != CUDA_SUCCESS)
    return;
  const OrdinalInfo* o = Ordinal(ordinal);
  if (o == nullptr || o->dev < 0 || o->memory_limited == 0) return;
  uint64_t fp = LinearFootprint(bytes, o->granularity);
  ForceCharge(o->dev, fp);
  AllocEntry e;
  e.key = ptr;
  e.kind = AllocKind::kLinear;
  e.dev = o->dev;
  e.bytes = fp;
  Track(e);
}

// For an imported pointer (IPC, pool import): the current target and the footprint of the
// allocation that holds `p`. False when either is unknown (nothing is charged then).
inline bool ImportedFootprint(CUdeviceptr p, Target* t, uint64_t* fp) {
  auto range = Real<CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr)>(kFn_cuMemGetAddressRange_v2);
  CUdeviceptr base = 0;
  size_t size = 0;
  if (!CurrentTarget(t) || range == nullptr || range(&base, &size, p) != CUDA_SUCCESS) return false;
  *fp = LinearFootprint(size, t->info->granularity);
  return true;
}

// Destroys a tracked object (array, mipmapped array, external memory) and releases its charge.
template <typename Fn, typename Handle>
inline CUresult DestroyTracked(Fn real, Handle h, AllocKind kind) {
  if (h == nullptr || !Active()) return real(h);
  AllocEntry e;
  bool had = Untrack(kind, reinterpret_cast<uint64_t>(h), &e);
  CUresult r = real(h);
  FinishFree(r, had, e);
  return r;
}

}  // namespace gpushare::interpose

#define GPUSHARE_EXPORT extern "C" __attribute__((visibility("default")))
#define GPUSHARE_GET_REAL(name)    \
  auto real = GPUSHARE_REAL(name); \
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED

// A wrapper whose work is one expression over the driver's function, `real`: one line for each
// member of a family of versioned twins (_v2, _ptsz) that share a helper. `params` is the
// parenthesised parameter list, e.g.
//   GPUSHARE_HOOK(cuMemFreeAsync, (CUdeviceptr dptr, CUstream s), FreeAsync(real, dptr, s))
#define GPUSHARE_HOOK(name, params, ...) \
  GPUSHARE_EXPORT CUresult name params { \
    GPUSHARE_GET_REAL(name);             \
    return __VA_ARGS__;                  \
  }
