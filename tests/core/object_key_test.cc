// core/object_key.h: "namespace/name" split in one place.
#include "core/object_key.h"

#include <gtest/gtest.h>

namespace gpushare {
namespace {

TEST(ObjectKey, SplitsAtTheFirstSlashAndJoinsBack) {
  EXPECT_EQ(ObjectKey::Of("ml/train-0"), (ObjectKey{"ml", "train-0"}));
  EXPECT_EQ(ObjectKey::Of("ml/train-0").String(), "ml/train-0");
  EXPECT_EQ(ObjectKey::Of("node-1"), (ObjectKey{"", "node-1"})) << "cluster-scoped";
  EXPECT_EQ(ObjectKey::Of("node-1").String(), "node-1");
  EXPECT_EQ(ObjectKey::Of("a/b/c"), (ObjectKey{"a", "b/c"})) << "a namespace holds no '/'";
  EXPECT_EQ(ObjectKey::NamespaceOf("ml/train-0"), "ml");
  EXPECT_EQ(ObjectKey::NamespaceOf("node-1"), "");
}

}  // namespace
}  // namespace gpushare
