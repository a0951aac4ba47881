// gpushare-scheduler's node-name index (scheduler/name_index.h): ids in insertion order,
// lookups of near-miss names, growth, and how the hash spreads similar names.
#include "scheduler/name_index.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace gpushare::scheduler {
namespace {

TEST(NameIndex, IdsInInsertionOrderLookupsAndGrowth) {
  NameIndex index;
  EXPECT_EQ(index.Find("a"), NameIndex::kNone);
  std::vector<std::string> names;
  for (int i = 0; i < 20000; ++i)
    names.push_back("ip-10-0-" + std::to_string(i / 250) + "-" + std::to_string(i % 250) +
                    ".us-west-2.compute.internal");
  names.push_back("");   // the empty name is a name too
  names.push_back("x");  // short names take the short-hash path
  names.push_back("abcd");
  names.push_back("abcdefgh");
  for (size_t i = 0; i < names.size(); ++i)
    ASSERT_EQ(index.Insert(names[i]), static_cast<int32_t>(i));
  EXPECT_EQ(index.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_EQ(index.Find(names[i]), static_cast<int32_t>(i)) << names[i];
    ASSERT_EQ(index.name(static_cast<int32_t>(i)), names[i]);
  }
  EXPECT_EQ(index.Insert(names[7]), 7);  // already there: the same id, nothing added
  EXPECT_EQ(index.size(), names.size());
  // Near misses: one byte changed, one byte more or less.
  EXPECT_EQ(index.Find("ip-10-0-0-0.us-west-2.compute.internaL"), NameIndex::kNone);
  EXPECT_EQ(index.Find("ip-10-0-0-0.us-west-2.compute.interna"), NameIndex::kNone);
  EXPECT_EQ(index.Find("ip-10-0-0-0.us-west-2.compute.internal."), NameIndex::kNone);
  EXPECT_EQ(index.Find("abc"), NameIndex::kNone);
}

TEST(NameIndex, HashSpreadsSimilarNames) {
  // Names differing in one character anywhere land on different hashes (no systematic
  // collisions from the overlapping tail loads).
  std::set<uint64_t> seen;
  const std::string base = "gke-prod-gpu-pool-4f3a2b1c-x7k9";
  for (size_t i = 0; i < base.size(); ++i) {
    for (char c : std::string("0123456789abcdefghijklmnopqrstuvwxyz")) {
      std::string s = base;
      s[i] = c;
      seen.insert(NameIndex::Hash(s));
    }
  }
  std::set<std::string> distinct;
  for (size_t i = 0; i < base.size(); ++i)
    for (char c : std::string("0123456789abcdefghijklmnopqrstuvwxyz")) {
      std::string s = base;
      s[i] = c;
      distinct.insert(s);
    }
  EXPECT_EQ(seen.size(), distinct.size());
}

}  // namespace
}  // namespace gpushare::scheduler
