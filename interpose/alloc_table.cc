// See alloc_table.h.
#include "interpose/alloc_table.h"

#include <sys/mman.h>

namespace gpushare::interpose {
namespace {

// Prime capacities just above powers of two (a prime modulus spreads strided addresses).
constexpr uint64_t kPrimes[] = {
    1031ull,      2053ull,      4099ull,       8209ull,       16411ull,     32771ull,
    65537ull,     131101ull,    262147ull,     524309ull,     1048583ull,   2097169ull,
    4194319ull,   8388617ull,   16777259ull,   33554467ull,   67108879ull,  134217757ull,
    268435459ull, 536870923ull, 1073741827ull, 2147483659ull, 4294967311ull};

AllocEntry* MapSlots(size_t n) {
  size_t bytes = n * sizeof(AllocEntry);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  // Large tables are probed at random: huge pages keep that from costing a TLB miss per probe
  // (a hint; ignored where transparent huge pages are off).
  if (bytes >= (2u << 20)) (void)madvise(p, bytes, MADV_HUGEPAGE);
  return static_cast<AllocEntry*>(p);  // zero-filled == all kEmpty
}

void UnmapSlots(AllocEntry* p, size_t n) {
  if (p != nullptr) munmap(p, n * sizeof(AllocEntry));
}

}  // namespace

size_t AllocTable::Home(AllocKind kind, uint64_t key) const {
  // Locality-preserving: device addresses (512-byte aligned) map by their 512-byte granule,
  // handles by value, modulo a prime. Allocations close in address space (the driver reuses and
  // packs addresses) land in nearby slots, so an insert rarely touches a cold cache line, while
  // the prime keeps power-of-two strides from piling onto a few slots.
  bool address = kind == AllocKind::kLinear || kind == AllocKind::kAsync ||
                 kind == AllocKind::kIpc || kind == AllocKind::kVmmMapping;
  uint64_t v = (address ? key >> 9 : key) + static_cast<uint64_t>(kind) * 0x9e3779b97f4aull;
  return static_cast<size_t>(v % cap_);
}

size_t AllocTable::Next(size_t i) const {
  return i + 1 == cap_ ? 0 : i + 1;
}

bool AllocTable::Grow() {
  size_t ncap = 0;
  for (uint64_t p : kPrimes)
    if (p > cap_) {
      ncap = static_cast<size_t>(p);
      break;
    }
  if (ncap == 0) return false;
  AllocEntry* fresh = MapSlots(ncap);
  if (fresh == nullptr) return false;
  AllocEntry* old = slots_;
  size_t ocap = cap_;
  slots_ = fresh;
  cap_ = ncap;
  count_ = 0;
  for (size_t i = 0; i < ocap; ++i) {
    if (old[i].kind == AllocKind::kEmpty) continue;
    size_t j = Home(old[i].kind, old[i].key);
    while (slots_[j].kind != AllocKind::kEmpty) j = Next(j);
    slots_[j] = old[i];
    ++count_;
  }
  UnmapSlots(old, ocap);
  return true;
}

bool AllocTable::Put(const AllocEntry& e) {
  if (e.kind == AllocKind::kEmpty) return false;
  if ((count_ + 1) * 2 > cap_ && !Grow()) {
    if (cap_ == 0 || count_ + 1 >= cap_) return false;  // keep one hole so probes terminate
  }
  size_t i = Home(e.kind, e.key);
  while (slots_[i].kind != AllocKind::kEmpty) {
    if (slots_[i].kind == e.kind && slots_[i].key == e.key) {
      slots_[i] = e;
      return true;
    }
    i = Next(i);
  }
  slots_[i] = e;
  ++count_;
  return true;
}

AllocEntry* AllocTable::Find(AllocKind kind, uint64_t key) {
  if (cap_ == 0) return nullptr;
  size_t i = Home(kind, key);
  while (slots_[i].kind != AllocKind::kEmpty) {
    if (slots_[i].kind == kind && slots_[i].key == key) return &slots_[i];
    i = Next(i);
  }
  return nullptr;
}

void AllocTable::EraseAt(size_t i) {
  // Backward-shift deletion: pull later members of the probe run into the hole.
  size_t hole = i;
  size_t j = i;
  for (;;) {
    j = Next(j);
    if (slots_[j].kind == AllocKind::kEmpty) break;
    size_t home = Home(slots_[j].kind, slots_[j].key);
    // Move j into the hole if its home is not cyclically within (hole, j].
    bool home_in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (!home_in_range) {
      slots_[hole] = slots_[j];
      hole = j;
    }
  }
  slots_[hole] = AllocEntry{};
  --count_;
}

bool AllocTable::Remove(AllocKind kind, uint64_t key, AllocEntry* out) {
  AllocEntry* e = Find(kind, key);
  if (e == nullptr) return false;
  if (out != nullptr) *out = *e;
  EraseAt(static_cast<size_t>(e - slots_));
  return true;
}

void AllocTable::Clear() {
  for (size_t i = 0; i < cap_; ++i) slots_[i] = AllocEntry{};
  count_ = 0;
}

void AllocTable::Free() {
  UnmapSlots(slots_, cap_);
  slots_ = nullptr;
  cap_ = 0;
  count_ = 0;
}

}  // namespace gpushare::interpose
