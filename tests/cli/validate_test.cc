// `gpushare validate` as a real process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "core/lines.h"
#include "tests/cli/run_process.h"

namespace gpushare {
namespace {

using ::testing::HasSubstr;
using testing::WriteTempFile;
using testing::RunProcess;

const std::string kCli = std::string(GPUSHARE_BIN_DIR) + "/gpushare";
const std::string kSrc = GPUSHARE_SOURCE_DIR;


TEST(Validate, ExampleConfigsAreValid) {
  for (const char* name : {"8x-a10", "h100-80gb-mig-1g.10gb", "mixed"}) {
    const std::string cfg = kSrc + "/examples/config/" + name + ".yaml";
    const std::string inv = kSrc + "/examples/inventory/" + name + ".yaml";
    auto r = RunProcess({kCli, "validate", cfg});
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr(cfg + ": valid"));
    r = RunProcess({kCli, "validate", cfg, "--inventory", inv});
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.out << r.err;
  }
  auto r = RunProcess({kCli, "validate", kSrc + "/examples/config/8x-a10.yaml", "--inventory",
                kSrc + "/examples/inventory/8x-a10.yaml"});
  EXPECT_THAT(r.out, HasSubstr("nvidia.com/gpu: 80"));
  r = RunProcess({kCli, "validate", kSrc + "/examples/config/h100-80gb-mig-1g.10gb.yaml", "--inventory",
           kSrc + "/examples/inventory/h100-80gb-mig-1g.10gb.yaml"});
  EXPECT_THAT(r.out, HasSubstr("nvidia.com/mig-1g.10gb: 21"));
}

TEST(Validate, InvalidFileExitsTwoWithOneLinePerProblem) {
  std::string bad = WriteTempFile("bad.yaml",
                             "version: v1\nflags:\n  migStrategy: mixed\n  plugin:\n"
                             "    deviceIDStrategy: serial\nsharing:\n  timeSlicing:\n"
                             "    resources:\n    - name: nvidia.com/mig-1g.10gb\n"
                             "      replicas: 49\n    - name: nvidia.com/gpu\n      devices: nope\n"
                             "      replicas: 2\n");
  auto r = RunProcess({kCli, "validate", bad});
  EXPECT_EQ(r.exit_code, 2);
  auto lines = SplitLines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines[0], "flags.plugin.deviceIDStrategy: must be uuid or index, got \"serial\" (" +
                          bad + ":5:23)");
  EXPECT_EQ(lines[1], "sharing.timeSlicing.resources[0].replicas: must be 2..48, got 49 (the "
                      "ceiling is gpushare.maxClientsPerGpu) (" + bad + ":10:17)");
  EXPECT_THAT(lines[2], HasSubstr("sharing.timeSlicing.resources[1].devices: must be \"all\""));
}

TEST(Validate, PlanChecksNeedTheInventory) {
  std::string cfg = WriteTempFile("sel.yaml",
                             "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                             "      devices: [7, 8]\n      rename: nvidia.com/gpu.shared\n"
                             "      replicas: 4\n");
  auto r = RunProcess({kCli, "validate", cfg});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  r = RunProcess({kCli, "validate", cfg, "--inventory", kSrc + "/examples/inventory/8x-a10.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(SplitLines(r.out),
            (std::vector<std::string>{"sharing.timeSlicing.resources[0].devices[1]: \"8\" matches "
                                      "no nvidia.com/gpu device on this node"}));
}

TEST(Validate, MissingFileAndUsage) {
  auto r = RunProcess({kCli, "validate", "/nonexistent/config.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("cannot read /nonexistent/config.yaml"));
  r = RunProcess({kCli, "validate"});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(Validate, EnvironmentIsNotApplied) {
  auto r = RunProcess({kCli, "validate", kSrc + "/examples/config/8x-a10.yaml"},
               {{"MIG_STRATEGY", "bogus"}});
  EXPECT_EQ(r.exit_code, 0) << "the file is checked as written: " << r.out;
}

}  // namespace
}  // namespace gpushare
