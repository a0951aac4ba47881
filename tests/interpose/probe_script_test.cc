// /probe.sh of the e2e CUDA probe image (e2e/images/cuda-probe, docs/e2e.md), run on this
// machine the way the image runs it: the fake driver as libcuda.so.1, the built interposer
// preloaded, the limit from a config file as gpushare-node writes it (devices named by UUID) or
// from the environment. Checks the summary line the e2e test reads.
#include <gtest/gtest.h>

#include <string>

#include "tests/interpose/probe.h"

namespace gpushare::interpose::testing {
namespace {

const char* kUuid = "GPU-e7158a80-21f6-4544-e06c-85afbaec4ef7";

std::string Script() {
  return std::string(GPUSHARE_SOURCE_DIR) + "/e2e/images/cuda-probe/probe.sh";
}

// The environment of the image: the double's config is the image's (probe.sh adds the UUID),
// scratch files in the test's directory.
Env ScriptEnv(const ScratchDir& dir, const Env& extra) {
  Env env = ProbeEnv(dir, true, extra);
  env.erase("FAKE_CUDA_CONFIG");
  env["PROBE_BIN"] = ProbeBin("cuda-probe-dlopen");
  env["PROBE_BASE_CONFIG"] =
      std::string(GPUSHARE_SOURCE_DIR) + "/e2e/images/cuda-probe/fake-cuda.conf";
  env["PROBE_TIMEOUT_S"] = "30";
  env["TMPDIR"] = dir.path();
  return env;
}

// The one line that starts with "probe: total_mib=" or "probe: error" (empty when none).
std::string Summary(const ProbeResult& r) {
  std::string found;
  for (const std::string& l : r.lines)
    if (l.rfind("probe: total_mib=", 0) == 0 || l.rfind("probe: error", 0) == 0) found = l;
  return found;
}

// The config gpushare-node's Allocate writes (core/interposer_contract.cc) for a 3 GiB share
// of GPU kUuid; returns its path.
std::string WriteNodeConfig(const ScratchDir& dir) {
  dir.Write("config", "version=1\nregion=" + dir.File("region") + "\ndevice.0.uuid=" + kUuid +
                          "\ndevice.0.memory_limit=3072m\ndevice.0.sm_limit=0\n");
  return dir.File("config");
}

std::string Dump(const ProbeResult& r) {
  std::string s;
  for (const std::string& l : r.lines) s += l + "\n";
  return s + r.err;
}

// The node's config with the default context overhead (300 MiB charged per context, so 2772 MiB
// are free to allocate out of 3072).
TEST(ProbeScript, ConfigFileLimitAppliesToTheGpuNamedByNvidiaVisibleDevices) {
  ScratchDir dir;
  ProbeResult r = RunProbe("/bin/sh",
                           ScriptEnv(dir, {{"GPUSHARE_CONFIG", WriteNodeConfig(dir)},
                                           {"NVIDIA_VISIBLE_DEVICES", kUuid},
                                           {"CUDA_DEVICE_MEMORY_LIMIT_0", "3072m"}}),
                           {Script(), "once"});
  EXPECT_EQ(r.status, 0) << Dump(r);
  EXPECT_EQ(
      Summary(r),
      "probe: total_mib=3072 free_mib=2772 allocated_mib=2560 free_after_mib=212 step_mib=256 "
      "next=CUDA_ERROR_OUT_OF_MEMORY")
      << Dump(r);
}

// Without the UUID of the GPU the container was given, the double would report its own and
// the config's limit would not apply to it: the summary shows the whole device.
TEST(ProbeScript, AnotherGpuIsNotLimited) {
  ScratchDir dir;
  ProbeResult r = RunProbe(
      "/bin/sh",
      ScriptEnv(dir, {{"GPUSHARE_CONFIG", WriteNodeConfig(dir)},
                      {"NVIDIA_VISIBLE_DEVICES", "GPU-02ff349d-4f87-6aa3-9c2b-9d9f2ae75e2e"},
                      {"PROBE_CAP_MIB", "1024"}}),
      {Script(), "once"});
  EXPECT_EQ(r.status, 0) << Dump(r);
  EXPECT_EQ(
      Summary(r),
      "probe: total_mib=81920 free_mib=81920 allocated_mib=1024 free_after_mib=80896 step_mib=256 "
      "next=CAP_REACHED")
      << Dump(r);
}

// The environment contract (HAMi's variables), no context overhead: exactly 3 GiB allocate.
TEST(ProbeScript, EnvironmentLimitWithoutContextOverheadAllocatesExactlyTheLimit) {
  ScratchDir dir;
  ProbeResult r = RunProbe(
      "/bin/sh",
      ScriptEnv(dir, {{"CUDA_DEVICE_MEMORY_LIMIT_0", "3072m"}, {"GPUSHARE_CONTEXT_OVERHEAD", "0"}}),
      {Script(), "once"});
  EXPECT_EQ(r.status, 0) << Dump(r);
  EXPECT_EQ(Summary(r),
            "probe: total_mib=3072 free_mib=3072 allocated_mib=3072 free_after_mib=0 step_mib=256 "
            "next=CUDA_ERROR_OUT_OF_MEMORY")
      << Dump(r);
}

// No limit: the loop stops at its cap, never allocating the whole device.
TEST(ProbeScript, NoLimitStopsAtTheCap) {
  ScratchDir dir;
  ProbeResult r = RunProbe("/bin/sh", ScriptEnv(dir, {}), {Script(), "once"});
  EXPECT_EQ(r.status, 0) << Dump(r);
  EXPECT_EQ(
      Summary(r),
      "probe: total_mib=81920 free_mib=81920 allocated_mib=8192 free_after_mib=73728 step_mib=256 "
      "next=CAP_REACHED")
      << Dump(r);
}

// A driver that cannot be loaded: an error summary and exit 1, within the probe's time bound.
TEST(ProbeScript, NoDriverGivesAnErrorSummary) {
  ScratchDir dir;
  ProbeResult r =
      RunProbe("/bin/sh", ScriptEnv(dir, {{"LD_LIBRARY_PATH", dir.path()}}), {Script(), "once"});
  EXPECT_EQ(r.status, 1) << Dump(r);
  EXPECT_EQ(Summary(r), "probe: error step=cuInit result=NO_ANSWER") << Dump(r);
  EXPECT_NE(r.err.find("libcuda.so.1"), std::string::npos) << Dump(r);
}

}  // namespace
}  // namespace gpushare::interpose::testing
