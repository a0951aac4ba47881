// NameIndex: node name -> dense id (0, 1, 2, ... in insertion order), the scheduler cache's
// lookup on the hot path of every filter and prioritize: one lookup per listed node, 5,000 per
// request at 5,000 nodes, with names of about 40 characters (EKS and GKE node names).
//
// Layout, chosen for that loop (each part stays in L2 at 5,000 nodes):
//   - slots: open addressing with linear probing, at most half full; a slot is 8 bytes (32
//     bits of the hash and the id + 1), so 16,384 slots are 128 KiB;
//   - entries, by id: where the name lies in the arena (8 bytes each);
//   - arena: every name back to back (about 40 bytes a node).
// A lookup hashes the name, probes the slots, and compares bytes only when 32 hash bits agree,
// against the contiguous arena: never against a std::string on the heap (a name longer than 15
// characters lives behind a pointer, and following it costs a cache miss per listed node).
// Insert-only: the cache keeps a deleted node's record for the pods that still point at it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace gpushare::scheduler {

class NameIndex {
 public:
  static constexpr int32_t kNone = -1;

  // The id of `name`, or kNone.
  int32_t Find(std::string_view name) const {
    if (slots_.empty()) return kNone;
    const uint64_t h = Hash(name);
    const uint32_t tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot s = slots_[i];
      if (s.id_plus_one == 0) return kNone;
      if (s.tag == tag && Matches(s.id_plus_one - 1, name))
        return static_cast<int32_t>(s.id_plus_one - 1);
    }
  }
  // The id of `name`, added with the next id (== size() before the call) when absent.
  int32_t Insert(std::string_view name) {
    if (const int32_t id = Find(name); id != kNone) return id;
    if ((entries_.size() + 1) * 2 > slots_.size()) Grow();
    const uint32_t id = static_cast<uint32_t>(entries_.size());
    entries_.push_back({static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(name.size())});
    arena_.append(name);
    Place(Hash(name), id);
    return static_cast<int32_t>(id);
  }
  std::string_view name(int32_t id) const {
    const Entry& e = entries_[static_cast<size_t>(id)];
    return std::string_view(arena_.data() + e.offset, e.length);
  }
  size_t size() const { return entries_.size(); }

  // 16 bytes per 64x64->128-bit multiply, the product's halves xored (the multiply-fold mix
  // of wyhash and xxh3); the last 1..16 bytes are read with two overlapping loads. Four
  // dependent multiplies for a 40-character name, against seven 8-byte rounds before (and
  // std::hash's byte-oriented tail). Names come from the API server (nodes), not from the
  // requests that look them up, so the table needs no keyed hash against flooding.
  static uint64_t Hash(std::string_view s) {
    const char* p = s.data();
    size_t n = s.size();
    uint64_t h = 0xC2B2AE3D27D4EB4Full ^ n;
    for (; n > 16; p += 16, n -= 16) h = Mix(Load8(p) ^ 0x9E3779B97F4A7C15ull, Load8(p + 8) ^ h);
    uint64_t a = 0, b = 0;
    if (n >= 8) {
      a = Load8(p);
      b = Load8(p + n - 8);
    } else if (n >= 4) {
      a = Load4(p);
      b = Load4(p + n - 4);
    } else if (n > 0) {
      a = (uint64_t{static_cast<unsigned char>(p[0])} << 16) |
          (uint64_t{static_cast<unsigned char>(p[n / 2])} << 8) |
          static_cast<unsigned char>(p[n - 1]);
    }
    return Mix(0x165667B19E3779F9ull ^ s.size(), Mix(a ^ 0xD6E8FEB86659FD93ull, b ^ h));
  }

 private:
  struct Slot {
    uint32_t tag = 0;          // the hash's upper 32 bits
    uint32_t id_plus_one = 0;  // 0: empty
  };
  struct Entry {
    uint32_t offset;  // of the name in arena_
    uint32_t length;
  };
  static uint64_t Mix(uint64_t x, uint64_t y) {
    const unsigned __int128 m = static_cast<unsigned __int128>(x) * y;
    return static_cast<uint64_t>(m) ^ static_cast<uint64_t>(m >> 64);
  }
  static uint64_t Load8(const char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  static uint64_t Load4(const char* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  bool Matches(uint32_t id, std::string_view name) const {
    const Entry& e = entries_[id];
    return e.length == name.size() &&
           (name.empty() || std::memcmp(arena_.data() + e.offset, name.data(), name.size()) == 0);
  }
  void Place(uint64_t h, uint32_t id) {
    size_t i = h & mask_;
    while (slots_[i].id_plus_one != 0) i = (i + 1) & mask_;
    slots_[i] = {static_cast<uint32_t>(h >> 32), id + 1};
  }
  void Grow() {
    slots_.assign(slots_.empty() ? 64 : slots_.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (uint32_t id = 0; id < entries_.size(); ++id)
      Place(Hash(name(static_cast<int32_t>(id))), id);
  }

  std::vector<Slot> slots_;
  std::vector<Entry> entries_;  // by id
  std::string arena_;           // every name, back to back
  size_t mask_ = 0;
};

}  // namespace gpushare::scheduler
