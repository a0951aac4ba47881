// core/config_select.h: which named config a node uses, and when the agent reloads it.
#include "core/config_select.h"

#include <gtest/gtest.h>

namespace gpushare {
namespace {

const std::string kLabel = kDefaultConfigNodeLabel;
const std::vector<std::string> kTwo = {"small", "big"};

TEST(SelectConfig, TheLabelNamesTheConfig) {
  auto r = SelectConfig({{kLabel, "big"}, {"other", "x"}}, kLabel, "small", kTwo);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, "big");  // the label wins over the default
}

TEST(SelectConfig, AnUnknownLabelValueNamesLabelValueAndConfigs) {
  auto r = SelectConfig({{kLabel, "huge"}}, kLabel, "small", kTwo);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(
      r.status().message(),
      "node label nvidia.com/device-plugin.config=\"huge\" names a config that does not exist "
      "(available: big, small)");
}

TEST(SelectConfig, WithoutTheLabelTheDefault) {
  auto r = SelectConfig({{"other", "x"}}, kLabel, "small", kTwo);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "small");
}

TEST(SelectConfig, AMissingDefaultIsAnError) {
  auto r = SelectConfig({}, kLabel, "medium", kTwo);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--default-config \"medium\""), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("available: big, small"), std::string::npos);
}

TEST(SelectConfig, WithoutLabelAndDefaultTheOnlyConfig) {
  auto r = SelectConfig({}, kLabel, "", {"only"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "only");
}

TEST(SelectConfig, WithoutLabelAndDefaultSeveralConfigsAreAnError) {
  auto r = SelectConfig({}, kLabel, "", kTwo);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  const std::string m = r.status().message();
  EXPECT_NE(m.find("no label nvidia.com/device-plugin.config"), std::string::npos) << m;
  EXPECT_NE(m.find("available: big, small"), std::string::npos) << m;
}

TEST(SelectConfig, AnEmptyDirectoryIsAnError) {
  auto r = SelectConfig({}, kLabel, "", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the config directory is empty"), std::string::npos)
      << r.status().message();
}

ConfigLook Selected(std::string name, uint64_t hash) {
  return {ConfigLook::Kind::kSelected, std::move(name), hash, ""};
}

TEST(ConfigPoller, PollsEveryInterval) {
  ConfigPoller p(10000, "a", 1, 5000);
  EXPECT_EQ(p.NextPollMs(), 15000);
  p.Observe(Selected("a", 1), 15003);
  EXPECT_EQ(p.NextPollMs(), 25003);
}

TEST(ConfigPoller, SameBytesDoNothing) {
  ConfigPoller p(10000, "a", 1, 0);
  EXPECT_EQ(p.Observe(Selected("a", 1), 10000).action, ConfigAction::kNone);
  EXPECT_EQ(p.Observe(Selected("a", 1), 20000).action, ConfigAction::kNone);
}

TEST(ConfigPoller, ChangedBytesReloadOnce) {
  ConfigPoller p(10000, "a", 1, 0);
  ConfigDecision d = p.Observe(Selected("a", 2), 10000);
  EXPECT_EQ(d.action, ConfigAction::kReload);
  EXPECT_EQ(d.message, "config \"a\" changed");
  // Asked already (the reload is under way, or was refused): not again for the same bytes.
  EXPECT_EQ(p.Observe(Selected("a", 2), 20000).action, ConfigAction::kNone);
  p.Loaded("a", 2);
  EXPECT_EQ(p.Observe(Selected("a", 2), 30000).action, ConfigAction::kNone);
  EXPECT_EQ(p.Observe(Selected("a", 3), 40000).action, ConfigAction::kReload);
}

TEST(ConfigPoller, APlainFileSaysSo) {
  ConfigPoller p(10000, "", 1, 0);
  EXPECT_EQ(p.Observe(Selected("", 2), 10000),
            (ConfigDecision{ConfigAction::kReload, "the config file changed"}));
}

TEST(ConfigPoller, AnotherLabelReloads) {
  ConfigPoller p(10000, "small", 1, 0);
  ConfigDecision d = p.Observe(Selected("big", 7), 10000);
  EXPECT_EQ(d.action, ConfigAction::kReload);
  EXPECT_EQ(d.message, "the node now selects config \"big\" (was \"small\")");
}

TEST(ConfigPoller, ARefusedConfigIsNotRetriedUntilItChanges) {
  ConfigPoller p(10000, "a", 1, 0);
  EXPECT_EQ(p.Observe(Selected("a", 2), 10000).action,
            ConfigAction::kReload);  // refused by the agent
  EXPECT_EQ(p.Observe(Selected("a", 2), 20000).action, ConfigAction::kNone);
  EXPECT_EQ(p.Observe(Selected("a", 3), 30000).action, ConfigAction::kReload);  // fixed
}

TEST(ConfigPoller, BackToTheServingConfigThenToTheRefusedOneTriesAgain) {
  ConfigPoller p(10000, "small", 1, 0);
  EXPECT_EQ(p.Observe(Selected("bad", 9), 10000).action, ConfigAction::kReload);  // refused
  EXPECT_EQ(p.Observe(Selected("small", 1), 20000).action, ConfigAction::kNone);  // label back
  EXPECT_EQ(p.Observe(Selected("bad", 9), 30000).action, ConfigAction::kReload);  // and again
}

TEST(ConfigPoller, AnUnselectableConfigIsRejectedOncePerMessage) {
  ConfigPoller p(10000, "a", 1, 0);
  ConfigLook bad{ConfigLook::Kind::kUnselectable, "", 0, "label names x"};
  EXPECT_EQ(p.Observe(bad, 10000), (ConfigDecision{ConfigAction::kReject, "label names x"}));
  EXPECT_EQ(p.Observe(bad, 20000).action, ConfigAction::kNone);
  ConfigLook worse{ConfigLook::Kind::kUnselectable, "", 0, "label names y"};
  EXPECT_EQ(p.Observe(worse, 30000).action, ConfigAction::kReject);
  EXPECT_EQ(p.Observe(Selected("a", 1), 40000).action,
            ConfigAction::kNone);                                    // fixed: nothing to reload
  EXPECT_EQ(p.Observe(worse, 50000).action, ConfigAction::kReject);  // broken again: said again
}

TEST(ConfigPoller, AnUnreachableApiIsAWarningAndKeepsTheConfig) {
  ConfigPoller p(10000, "a", 1, 0);
  ConfigLook down{ConfigLook::Kind::kLabelsUnavailable, "", 0, "connection refused"};
  EXPECT_EQ(p.Observe(down, 10000), (ConfigDecision{ConfigAction::kWarn, "connection refused"}));
  EXPECT_EQ(p.Observe(down, 20000).action, ConfigAction::kNone);
  EXPECT_EQ(p.Observe(Selected("a", 1), 30000).action, ConfigAction::kNone);
  EXPECT_EQ(p.serving_name(), "a");
}

TEST(StartupRetry, BacksOffAndGivesUpAtTheBudget) {
  EXPECT_EQ(StartupRetryAtMs(0, 0, 1, 30000), 500);
  EXPECT_EQ(StartupRetryAtMs(0, 500, 2, 30000), 1500);
  EXPECT_EQ(StartupRetryAtMs(0, 1500, 3, 30000), 3500);
  EXPECT_EQ(StartupRetryAtMs(0, 10000, 10, 30000), 18000);  // at most 8 s apart
  EXPECT_EQ(StartupRetryAtMs(0, 29000, 11, 30000), 30000);  // a last try at the deadline
  EXPECT_EQ(StartupRetryAtMs(0, 30000, 12, 30000), std::nullopt);
}

}  // namespace
}  // namespace gpushare
