// The per-process allocation table against std::unordered_map under random operations.
#include "interpose/alloc_table.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <utility>

namespace gpushare::interpose {
namespace {

TEST(AllocTable, RandomOperationsMatchAReferenceMap) {
  AllocTable t;
  std::map<std::pair<int, uint64_t>, uint64_t> ref;
  std::mt19937_64 rng(7);
  for (int step = 0; step < 200000; ++step) {
    int kind = 1 + static_cast<int>(rng() % 3);
    uint64_t key = (rng() % 5000) * 512;  // dense keys exercise collisions and shifting
    int op = static_cast<int>(rng() % 3);
    auto k = std::make_pair(kind, key);
    if (op < 2) {
      AllocEntry e;
      e.kind = static_cast<AllocKind>(kind);
      e.key = key;
      e.bytes = rng();
      ASSERT_TRUE(t.Put(e));
      ref[k] = e.bytes;
    } else {
      AllocEntry out;
      bool had = t.Remove(static_cast<AllocKind>(kind), key, &out);
      ASSERT_EQ(had, ref.count(k) == 1) << step;
      if (had) {
        EXPECT_EQ(out.bytes, ref[k]);
        ref.erase(k);
      }
    }
    ASSERT_EQ(t.size(), ref.size());
  }
  for (const auto& [k, bytes] : ref) {
    AllocEntry* e = t.Find(static_cast<AllocKind>(k.first), k.second);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->bytes, bytes);
  }
  t.Free();
}

TEST(AllocTable, KindsDoNotCollideAndRemoveIfVisitsEverything) {
  AllocTable t;
  for (uint64_t i = 0; i < 3000; ++i) {
    AllocEntry e;
    e.kind = AllocKind::kLinear;
    e.key = i;
    e.ctx = i % 3;
    ASSERT_TRUE(t.Put(e));
    e.kind = AllocKind::kVmmHandle;
    ASSERT_TRUE(t.Put(e));
  }
  EXPECT_EQ(t.size(), 6000u);
  size_t removed = 0;
  t.RemoveIf([&](const AllocEntry& e) {
    bool r = e.kind == AllocKind::kLinear && e.ctx == 1;
    removed += r;
    return r;
  });
  EXPECT_EQ(removed, 1000u);
  EXPECT_EQ(t.size(), 5000u);
  for (uint64_t i = 0; i < 3000; ++i) {
    EXPECT_EQ(t.Find(AllocKind::kLinear, i) != nullptr, i % 3 != 1) << i;
    EXPECT_NE(t.Find(AllocKind::kVmmHandle, i), nullptr);
  }
  t.Clear();
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.Find(AllocKind::kVmmHandle, 5), nullptr);
  t.Free();
}

}  // namespace
}  // namespace gpushare::interpose
