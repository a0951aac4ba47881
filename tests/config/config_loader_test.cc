// The config loader's hand-written tests. What a config file (with environment and flags)
// becomes, or the problem lines it gets, is data: tests/testdata/config/*.txt, run by
// config_data_test.cc (docs/testing.md). What stays here reads real files (--config and
// CONFIG_FILE) or checks the settings table itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "config/node_config_loader.h"

namespace gpushare {
namespace {

using ::testing::HasSubstr;

TEST(ConfigFile, ReadFromFlagOrConfigFileEnvironment) {
  const std::string a = ::testing::TempDir() + "/gpushare_cfg_a.yaml";
  const std::string b = ::testing::TempDir() + "/gpushare_cfg_b.yaml";
  std::ofstream(a) << "flags:\n  migStrategy: mixed\n";
  std::ofstream(b) << "flags:\n  migStrategy: single\n";
  NodeConfigFlags flags;
  auto r = LoadNodeConfigWithNotes(flags, {{"CONFIG_FILE", b}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.mig_strategy, MigStrategy::kSingle);
  EXPECT_EQ(r->config_path, b);
  flags.config_file = a;
  r = LoadNodeConfigWithNotes(flags, {{"CONFIG_FILE", b}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.mig_strategy, MigStrategy::kMixed);
  EXPECT_TRUE(LoadNodeConfigWithNotes(NodeConfigFlags{}, {})->config_path.empty());

  flags.config_file = ::testing::TempDir() + "/does-not-exist.yaml";
  auto missing = LoadNodeConfigWithNotes(flags, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("--config: cannot read"));
  EXPECT_THAT(missing.status().message(), HasSubstr("does-not-exist.yaml"));

  auto v = ValidateConfigFile(a);
  EXPECT_TRUE(v.ok());
  std::remove(a.c_str());
  std::remove(b.c_str());
}

TEST(ConfigLoader, SettingsTableHasNvidiaNames) {
  std::map<std::string, std::string> env_of;
  for (const auto& s : NodeConfigSettings()) env_of[s.file_path] = s.env;
  EXPECT_EQ(env_of["flags.migStrategy"], "MIG_STRATEGY");
  EXPECT_EQ(env_of["flags.failOnInitError"], "FAIL_ON_INIT_ERROR");
  EXPECT_EQ(env_of["flags.plugin.passDeviceSpecs"], "PASS_DEVICE_SPECS");
  EXPECT_EQ(env_of["flags.plugin.deviceListStrategy"], "DEVICE_LIST_STRATEGY");
  EXPECT_EQ(env_of["flags.plugin.deviceIDStrategy"], "DEVICE_ID_STRATEGY");
  EXPECT_EQ(env_of["gpushare.maxClientsPerGpu"], "GPUSHARE_MAX_CLIENTS_PER_GPU");
}

}  // namespace
}  // namespace gpushare
