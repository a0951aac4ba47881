// gpushare.memoryShares in the config file. The defaults, every key, flag > environment > file
// precedence and the refusals are data: tests/testdata/config/memory_shares.txt
// (docs/testing.md). What stays here reads the example file from examples/config/.
#include <gtest/gtest.h>

#include "config/node_config_loader.h"

namespace gpushare {
namespace {

TEST(MemorySharesConfig, TheExampleIsValid) {
  auto r =
      ValidateConfigFile(std::string(GPUSHARE_SOURCE_DIR) + "/examples/config/memory-shares.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->config.gpushare.memory_shares.enabled());
}

}  // namespace
}  // namespace gpushare
