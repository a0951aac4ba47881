// What nvidia-smi (linked against NVML) and pynvml (dlopen + dlsym) report inside a limited
// container: the limit as total, the container's usage, free = total - used, v1 and v2
// consistent with cuMemGetInfo, and never a wrapped-around free (HAMi#1181's 17 TB).
#include <gtest/gtest.h>

#include <string>

#include "tests/interpose/probe.h"

namespace gpushare::interpose::testing {
namespace {

const char* const kDev0 = "GPU-fa4e0000-0000-0000-0000-000000000000";

class Nvml : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(ProbeBin("nvml-probe").c_str(), X_OK) != 0)
      GTEST_SKIP() << "SKIPPED: nvml-probe not built";
    dir_.Write("fake.conf", "devices=1\n");
    dir_.Write("nvml.conf", std::string("gpu uuid=") + kDev0 +
                                " memory_mib=81920 used_mib=2048 reserved_mib=512\n");
  }
  Env Extra(const std::string& limit, const std::string& overhead = "0") {
    return {{"CUDA_DEVICE_MEMORY_LIMIT", limit},
            {"GPUSHARE_CONTEXT_OVERHEAD", overhead},
            {"FAKE_NVML_CONFIG", dir_.File("nvml.conf")},
            {"LD_LIBRARY_PATH", FakesDir() + "/cuda:" + FakesDir() + "/nvml"}};
  }
  ProbeResult Smi(const Env& extra, bool preload = true) {
    return RunProbe(ProbeBin("nvml-probe"), ProbeEnv(dir_, preload, extra), {"0"});
  }
  ScratchDir dir_;
};

TEST_F(Nvml, ReportsTheLimitAndTheContainersUsage) {
  RunningProbe cuda = StartProbe(ProbeBin("cuda-probe-linked"), ProbeEnv(dir_, true, Extra("4g")));
  cuda.Send("init");
  cuda.Send("ctx 0");
  cuda.Send("alloc 1073741824");
  ASSERT_EQ(cuda.WaitFor("alloc ").substr(0, 8), "alloc 0 ");
  cuda.Send("meminfo");
  std::string info = cuda.WaitFor("meminfo ");
  ProbeResult r = Smi(Extra("4g"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.Rc("v1"), 0);
  EXPECT_EQ(r.Num("v1", 0), 4 * GiB);
  EXPECT_EQ(r.Num("v1", 1), 3 * GiB);
  EXPECT_EQ(r.Num("v1", 2), 1 * GiB);
  EXPECT_EQ(r.Num("v2", 0), 4 * GiB);
  EXPECT_EQ(r.Num("v2", 1), 0u) << "reserved";
  EXPECT_EQ(r.Num("v2", 2), 3 * GiB);
  EXPECT_EQ(r.Num("v2", 3), 1 * GiB);
  EXPECT_EQ(r.Num("dlsym-v1", 0), 4 * GiB) << "pynvml's dlsym path too";
  EXPECT_EQ(r.Num("dlsym-v1", 1), 3 * GiB);
  EXPECT_EQ(info, "meminfo 0 " + std::to_string(3 * GiB) + " " + std::to_string(4 * GiB))
      << "cuMemGetInfo agrees with NVML";
  cuda.Send("exit");
  cuda.Wait();
}

TEST_F(Nvml, OverTheLimitFreeIsZeroNeverAWrap) {
  // A context overhead above the limit: usage > limit must not wrap free around.
  RunningProbe cuda =
      StartProbe(ProbeBin("cuda-probe-linked"), ProbeEnv(dir_, true, Extra("256m", "512m")));
  cuda.Send("init");
  cuda.Send("ctx 0");
  cuda.Send("meminfo");
  cuda.WaitFor("meminfo ");
  ProbeResult r = Smi(Extra("256m", "512m"));
  EXPECT_EQ(r.Num("v1", 0), 256 * MiB);
  EXPECT_EQ(r.Num("v1", 1), 0u);
  EXPECT_EQ(r.Num("v1", 2), 256 * MiB);
  EXPECT_EQ(r.Num("v2", 2), 0u);
  cuda.Send("exit");
  cuda.Wait();
}

TEST_F(Nvml, NoCudaProcessYetShowsTheWholeLimitFree) {
  ProbeResult r = Smi(Extra("8g"));
  EXPECT_EQ(r.Num("v1", 0), 8 * GiB);
  EXPECT_EQ(r.Num("v1", 1), 8 * GiB);
  EXPECT_EQ(r.Num("v1", 2), 0u);
}

TEST_F(Nvml, WithoutALimitNvmlIsUntouched) {
  Env extra = Extra("0");
  ProbeResult with = Smi(extra);
  ProbeResult without = Smi(extra, false);
  EXPECT_EQ(with.Find("v1"), without.Find("v1"));
  EXPECT_EQ(with.Find("v2"), without.Find("v2"));
  EXPECT_EQ(with.Num("v1", 0), 80 * GiB);
}

}  // namespace
}  // namespace gpushare::interpose::testing
