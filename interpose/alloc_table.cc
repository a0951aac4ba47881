// See alloc_table.h.
#include "interpose/alloc_table.h"

#include <sys/mman.h>

namespace gpushare::interpose {
namespace {

constexpr size_t kInitialCapacity = 1024;

AllocEntry* MapSlots(size_t n) {
  void* p = mmap(nullptr, n * sizeof(AllocEntry), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<AllocEntry*>(p);  // zero-filled == all kEmpty
}

void UnmapSlots(AllocEntry* p, size_t n) {
  if (p != nullptr) munmap(p, n * sizeof(AllocEntry));
}

}  // namespace

size_t AllocTable::Home(AllocKind kind, uint64_t key) const {
  uint64_t h = key ^ (static_cast<uint64_t>(kind) << 59);
  h ^= h >> 31;
  h *= 0x9e3779b97f4a7c15ull;
  h ^= h >> 29;
  return static_cast<size_t>(h) & (cap_ - 1);
}

bool AllocTable::Grow() {
  size_t ncap = cap_ == 0 ? kInitialCapacity : cap_ * 2;
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
    while (slots_[j].kind != AllocKind::kEmpty) j = (j + 1) & (cap_ - 1);
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
    i = (i + 1) & (cap_ - 1);
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
    i = (i + 1) & (cap_ - 1);
  }
  return nullptr;
}

void AllocTable::EraseAt(size_t i) {
  // Backward-shift deletion: pull later members of the probe run into the hole.
  size_t hole = i;
  size_t j = i;
  for (;;) {
    j = (j + 1) & (cap_ - 1);
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
