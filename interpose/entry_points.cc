// See entry_points.h.
#include "interpose/entry_points.h"

#include <string.h>

#include "interpose/base.h"

namespace gpushare::interpose {
namespace {

#define GPUSHARE_CUDA_ENTRY(base, version, per_thread, exported) \
  {#base, version, per_thread != 0, #exported},
constexpr EntryPoint kTable[] = {
#include "interpose/generated/cuda_entry_points.inc"
};
#undef GPUSHARE_CUDA_ENTRY
constexpr int kCount = static_cast<int>(sizeof(kTable) / sizeof(kTable[0]));

// Per-thread form of `legacy`: legacy + "_ptsz" or "_ptds".
bool IsPerThreadOf(const char* per_thread, const char* legacy) {
  size_t n = StrLen(legacy);
  return strncmp(per_thread, legacy, n) == 0 &&
         (StrEq(per_thread + n, "_ptsz") || StrEq(per_thread + n, "_ptds"));
}

}  // namespace

const EntryPoint* EntryPoints(int* count) {
  *count = kCount;
  return kTable;
}

const char* ResolveEntryPoint(const char* base, int cuda_version, uint64_t flags,
                              bool* version_too_low) {
  *version_too_low = false;
  if (base == nullptr) return nullptr;
  // Lower bound on the base name.
  int lo = 0, hi = kCount;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (strcmp(kTable[mid].base, base) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == kCount || strcmp(kTable[lo].base, base) != 0) return nullptr;
  const EntryPoint* legacy = nullptr;
  const EntryPoint* per_thread = nullptr;
  for (int i = lo; i < kCount && strcmp(kTable[i].base, base) == 0; ++i) {
    const EntryPoint& e = kTable[i];
    if (e.version > cuda_version) continue;
    if (e.per_thread) {
      if (per_thread == nullptr || e.version >= per_thread->version) per_thread = &e;
    } else {
      if (legacy == nullptr || e.version >= legacy->version) legacy = &e;
    }
  }
  if (legacy == nullptr) {
    *version_too_low = true;
    return nullptr;
  }
  if ((flags & 2u) != 0 && per_thread != nullptr &&
      IsPerThreadOf(per_thread->exported, legacy->exported))
    return per_thread->exported;
  return legacy->exported;
}

}  // namespace gpushare::interpose
