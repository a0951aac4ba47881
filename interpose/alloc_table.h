// alloc_table.h: this process's live allocations, for O(1) accounting on free.
//
// Each allocation the library charged is remembered here (device pointer, VMM handle, array,
// pool, context...) with its device and its charge, so a free finds what to release without
// walking a list (HAMi-core's linear free list costs ~25 us per free at 10,000 live
// allocations). Open addressing with linear probing and backward-shift deletion: no tombstones,
// so lookups stay short however many allocations come and go; a locality-preserving hash
// (address granule modulo a prime capacity) keeps nearby allocations in nearby slots. Storage comes
// from mmap, never from malloc (the library must not depend on the process's allocator) and grows
// by doubling at half load. Not thread-safe: the caller holds its process-local lock.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace gpushare::interpose {

enum class AllocKind : uint32_t {
  kEmpty = 0,
  kLinear,      // cuMemAlloc / cuMemAllocPitch / cuMemAllocManaged: key = device pointer
  kArray,       // cuArrayCreate / cuArray3DCreate: key = CUarray
  kMipmapped,   // cuMipmappedArrayCreate: key = CUmipmappedArray
  kAsync,       // stream-ordered allocation: key = pointer, aux = its pool (the pool is charged)
  kVmmHandle,   // cuMemCreate / import: key = handle; refs, maps in aux fields
  kVmmMapping,  // cuMemMap: key = mapped address, aux = handle, bytes = mapped size
  kIpc,         // cuIpcOpenMemHandle / cuMemPoolImportPointer: key = pointer
  kExternal,    // cuImportExternalMemory: key = CUexternalMemory
};

struct AllocEntry {
  uint64_t key = 0;
  AllocKind kind = AllocKind::kEmpty;
  int32_t dev = -1;       // region device index, -1 when not charged
  uint64_t bytes = 0;     // charge held for this entry
  uint64_t ctx = 0;       // owning context (freed with it), 0 = none
  uint64_t aux = 0;       // kind-specific (pool, handle)
  uint32_t refs = 0;      // kVmmHandle: unreleased references
  uint32_t maps = 0;      // kVmmHandle: live mappings
  uint64_t pool_use = 0;  // kAsync: its footprint in its pool's PoolInfo::in_use
};

class AllocTable {
 public:
  // Inserts or replaces (kind, key). False only if memory for growth cannot be mapped.
  bool Put(const AllocEntry& e);
  // Looks up (kind, key); nullptr if absent. The pointer is valid until the next Put/Remove.
  AllocEntry* Find(AllocKind kind, uint64_t key);
  // Removes (kind, key), copying it to *out when given. False if absent.
  bool Remove(AllocKind kind, uint64_t key, AllocEntry* out);
  size_t size() const { return count_; }
  size_t capacity() const { return cap_; }

  // Calls fn(entry) for every entry; entries for which it returns true are removed. O(capacity):
  // only for rare events (a context destroyed).
  template <typename Fn>
  void RemoveIf(Fn fn) {
    for (size_t i = 0; i < cap_;) {
      if (slots_[i].kind != AllocKind::kEmpty && fn(slots_[i])) {
        EraseAt(i);  // the next entry may have shifted into i: look at i again
      } else {
        ++i;
      }
    }
  }

  // Drops everything without releasing memory mappings (after fork, in the child).
  void Clear();
  // Releases the storage.
  void Free();

 private:
  size_t Home(AllocKind kind, uint64_t key) const;
  size_t Next(size_t i) const;
  bool Grow();
  void EraseAt(size_t i);

  AllocEntry* slots_ = nullptr;
  size_t cap_ = 0;  // a prime, 0 before first use
  size_t count_ = 0;
};

}  // namespace gpushare::interpose
