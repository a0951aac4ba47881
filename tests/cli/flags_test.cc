// The command lines of `gpushare` (every subcommand) and `gpushare-node` as real processes:
// an unknown subcommand is named (with the closest one), and every numeric flag is checked
// against its range with a message that names the flag and the range, exit status 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/strings.h"
#include "tests/cli/run_process.h"
#include "tests/config/input_files.h"

namespace gpushare {
namespace {

using ::testing::HasSubstr;
using testing::ProcessResult;
using testing::RunProcess;

const std::string kCli = std::string(GPUSHARE_BIN_DIR) + "/gpushare";
const std::string kNode = std::string(GPUSHARE_BIN_DIR) + "/gpushare-node";
const std::string kSrc = GPUSHARE_SOURCE_DIR;

TEST(GpushareCommand, UnknownSubcommandIsNamedWithTheClosestOne) {
  ProcessResult r = RunProcess({kCli, "simulat"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(SplitLines(r.err)[0],
            "gpushare: unknown command \"simulat\" (did you mean \"simulate\"?); commands: "
            "inspect, replay, simulate, validate");
  r = RunProcess({kCli, "valdiate", "x.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown command \"valdiate\" (did you mean \"validate\"?)"));
  // Nothing close: no suggestion.
  r = RunProcess({kCli, "install"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(SplitLines(r.err)[0],
            "gpushare: unknown command \"install\"; commands: inspect, replay, simulate, validate");
  r = RunProcess({kCli, "inspcet"});
  EXPECT_THAT(r.err, HasSubstr("unknown command \"inspcet\" (did you mean \"inspect\"?)"));
  // No command at all, and --help, as before.
  r = RunProcess({kCli});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("A subcommand is required"));
  r = RunProcess({kCli, "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("simulate"));
}

// --version: "<program> <x.y.z> (commit <git HEAD of the source>[-dirty])", exit 0, from every
// binary; the commit is the one the build saw (cmake/version.cmake regenerates it each build).
TEST(Version, EveryBinaryNamesItsVersionAndCommit) {
  if (std::string(GPUSHARE_GIT).empty()) GTEST_SKIP() << "SKIPPED: git not found at configure time";
  ProcessResult head = RunProcess({GPUSHARE_GIT, "-C", kSrc, "rev-parse", "HEAD"});
  if (head.exit_code != 0)
    GTEST_SKIP() << "SKIPPED: " << kSrc << " is not a git checkout: " << head.err;
  const std::string commit = SplitLines(head.out)[0];
  for (const std::string name : {"gpushare", "gpushare-node", "gpushare-scheduler"}) {
    SCOPED_TRACE(name);
    ProcessResult r = RunProcess({std::string(GPUSHARE_BIN_DIR) + "/" + name, "--version"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, ::testing::MatchesRegex(name + " [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit " +
                                               commit + "(-dirty)?\\)\n"));
  }
}

struct FlagCase {
  std::vector<std::string> args;
  std::string message;  // the first line of stderr
};

void ExpectRefused(const std::string& bin, const FlagCase& c) {
  std::vector<std::string> argv = {bin};
  argv.insert(argv.end(), c.args.begin(), c.args.end());
  // Were the flag accepted, nothing would be written into the working directory.
  // Were the flag accepted, nothing would be written into the working directory or the real
  // kubelet's directory, and a process that starts serving is stopped after 20 s.
  if (c.args[0] == "simulate") {
    argv.insert(argv.end(),
                {"--quiet", "--out", ::testing::TempDir() + "/flags_test_simulate_out"});
  } else {
    argv.insert(argv.end(), {"--device-plugin-dir", ::testing::TempDir() + "/flags_test_plugins"});
  }
  std::string joined;
  for (const auto& a : c.args) joined += " " + a;
  testing::Child child(argv);
  bool exited = false;
  for (int i = 0; i < 1000 && !(exited = child.Exited()); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(exited) << joined << ": accepted (still running after 20 s)";
  ProcessResult r = child.Wait();
  EXPECT_EQ(r.exit_code, 2) << joined << "\n" << r.out << r.err;
  auto lines = SplitLines(r.err);
  ASSERT_FALSE(lines.empty()) << joined;
  EXPECT_EQ(lines[0], c.message) << joined;
}

TEST(GpushareCommand, SimulateNumericFlagsAreRangeChecked) {
  for (const FlagCase& c : std::vector<FlagCase>{
           {{"simulate", "--tune", "-1"}, "--tune: must be 0..10 (0: no inflation), got -1"},
           {{"simulate", "--tune", "11"}, "--tune: must be 0..10 (0: no inflation), got 11"},
           {{"simulate", "--tune", "nan"}, "--tune: must be 0..10 (0: no inflation), got nan"},
           {{"simulate", "--tune", "inf"}, "--tune: must be 0..10 (0: no inflation), got inf"},
           {{"simulate", "--tune", "1.3x"}, "--tune: must be 0..10 (0: no inflation), got 1.3x"},
           {{"simulate", "--jobs", "-3"}, "--jobs: must be 0..1024 (0: one per CPU), got -3"},
           {{"simulate", "--jobs", "99999999999"},
            "--jobs: must be 0..1024 (0: one per CPU), got 99999999999"},
           {{"simulate", "--jobs", "two"}, "--jobs: must be 0..1024 (0: one per CPU), got two"},
           {{"simulate", "--seeds", "0-99999999"},
            "gpushare simulate: --seeds: at most 1000 seeds, got 100000000"},
           {{"simulate", "--seeds", "1-600,1000-1600"},
            "gpushare simulate: --seeds: at most 1000 seeds, got 1201"},
       }) {
    ExpectRefused(kCli, c);
  }
}

TEST(GpushareCommand, SimulateTraceFilesMustBeRegularFiles) {
  const std::string dir = ::testing::TempDir() + "/flags_trace_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  ProcessResult r = RunProcess({kCli, "simulate", "--nodes", dir, "--pods", "/dev/zero", "--quiet"},
                               testing::BoundedChildEnv());
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot read node list CSV " + dir + ": it is a directory"));
  // Within the CLI's own peak (`gpushare --version`, same build) and what a read may hold.
  const ProcessResult base = RunProcess({kCli, "--version"}, testing::BoundedChildEnv());
  EXPECT_LT(r.max_rss_kib, testing::InputMemoryBoundKib(base.max_rss_kib));
}

TEST(GpushareCommand, ReplayNeedsItsFilesAndACluster) {
  // Both trace files are required; a missing one is named before any API call.
  ProcessResult r = RunProcess({kCli, "replay", "--pods", "p.csv"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--nodes is required"));
  // The API retry budget is range-checked, and named.
  r = RunProcess({kCli, "replay", "--nodes", "n.csv", "--pods", "p.csv", "--api-retry", "-1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--api-retry"));
  r = RunProcess(
      {kCli, "replay", "--nodes", "/nonexistent/n.csv", "--pods", "/nonexistent/p.csv", "--quiet"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("gpushare replay: "));
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/n.csv"));
  // Good files, no cluster: the configuration error, not a hang.
  const std::string dir = ::testing::TempDir() + "/replay_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir + "/n.csv") << "sn,cpu_milli,memory_mib,gpu,model\nn0,8000,16384,1,T4\n";
    std::ofstream(dir + "/p.csv")
        << "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,0,1,500\n";
  }
  r = RunProcess({kCli, "replay", "--nodes", dir + "/n.csv", "--pods", dir + "/p.csv",
                  "--kubeconfig", dir + "/none.kubeconfig", "--quiet"});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("gpushare replay: no usable Kubernetes API configuration"));
}

TEST(GpushareNodeCommand, NumericFlagsAreRangeChecked) {
  const std::string inv = kSrc + "/examples/inventory/8x-a10.yaml";
  for (
      const FlagCase& c : std::vector<FlagCase>{
          {{"--print-resources", "--inventory", inv, "--max-clients-per-gpu", "-5"},
           "--max-clients-per-gpu: must be 1..1024, got -5"},
          {{"--print-resources", "--inventory", inv, "--max-clients-per-gpu",
            "99999999999999999999"},
           "--max-clients-per-gpu: must be 1..1024, got \"99999999999999999999\""},
          {{"--print-resources", "--inventory", inv, "--ignored-xids", "13,-5"},
           "--ignored-xids: must be a list of XIDs 1..65535, got \"-5\""},
          {{"--print-resources", "--inventory", inv, "--recover-after", "-5m"},
           "--recover-after: must be a duration like 30s, 5m or 1h (0 = never), got \"-5m\""},
          {{"--inventory", inv, "--reconcile-interval", "-5"},
           "--reconcile-interval: must be a positive duration from 100ms to 24h, like 10s, got -5"},
          {{"--inventory", inv, "--reconcile-interval", "0s"},
           "--reconcile-interval: must be a positive duration from 100ms to 24h, like 10s, got 0s"},
          {{"--inventory", inv, "--reconcile-interval", "1000h"},
           "--reconcile-interval: must be a positive duration from 100ms to 24h, like 10s, got "
           "1000h"},
      }) {
    ExpectRefused(kNode, c);
  }
}

TEST(GpushareNodeCommand, ConfigDirectoryIsRefused) {
  const std::string dir = ::testing::TempDir() + "/flags_cfgdir_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  ProcessResult r = RunProcess({kNode, "--print-resources", "--inventory",
                                kSrc + "/examples/inventory/8x-a10.yaml", "--config", dir});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.err, HasSubstr("--config: cannot read config file " + dir + ": it is a directory"));
}

TEST(GpushareNodeCommand, EmptyConfigIsAWarning) {
  const std::string cfg = testing::WriteTempFile("node_empty.yaml", "");
  ProcessResult r = RunProcess({kNode, "--print-resources", "--inventory",
                                kSrc + "/examples/inventory/8x-a10.yaml", "--config", cfg});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("warning: " + cfg + " has no settings (empty or only comments)"));
}

}  // namespace
}  // namespace gpushare
