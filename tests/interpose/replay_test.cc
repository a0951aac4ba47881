// Replays the CUDA 13.0 runtime's recorded cuGetProcAddress sequence (shared/data/cuda) against
// the fake driver, with and without the interposer. With a limit set, exactly the hooked ABIs
// come back as the interposer's wrappers, every other request gets the driver's own pointer,
// and return codes and symbol statuses are the driver's. Without a limit nothing is replaced.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "interpose/hooks.h"
#include "tests/interpose/probe.h"

namespace gpushare::interpose::testing {
namespace {

struct Answer {
  std::string name, version, flags, rc, status, lib, sym;
};

std::vector<Answer> Parse(const ProbeResult& r) {
  std::vector<Answer> out;
  for (const std::string& l : r.lines) {
    std::istringstream in(l);
    Answer a;
    in >> a.name >> a.version >> a.flags >> a.rc >> a.status >> a.lib >> a.sym;
    out.push_back(a);
  }
  return out;
}

std::string Sequence() {
  return std::string(GPUSHARE_SHARED_DIR) + "/data/cuda/cudart-13.0-getprocaddress.txt";
}

class Replay : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(Sequence().c_str(), R_OK) != 0)
      GTEST_SKIP() << "SKIPPED: " << Sequence() << " absent";
    dir_.Write("fake.conf", "devices=1\n");
    driver_ = Parse(RunProbe(ProbeBin("cuda-replay"), ProbeEnv(dir_, false), {Sequence()}));
    ASSERT_EQ(driver_.size(), 441u) << "the dlsym plus 440 requests";
  }
  ScratchDir dir_;
  std::vector<Answer> driver_;
};

TEST_F(Replay, HookedAbisGetWrappersEverythingElseTheDriversPointer) {
  ProbeResult r =
      RunProbe(ProbeBin("cuda-replay"), ProbeEnv(dir_, true, {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}}),
               {Sequence()});
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<Answer> with = Parse(r);
  ASSERT_EQ(with.size(), driver_.size());
#define GPUSHARE_NAME(name) #name,
  std::set<std::string> hooked = {GPUSHARE_CUDA_HOOKS(GPUSHARE_NAME)};
#undef GPUSHARE_NAME
  int wrapped = 0;
  for (size_t i = 0; i < with.size(); ++i) {
    const Answer& d = driver_[i];
    const Answer& w = with[i];
    SCOPED_TRACE(d.name + "@" + d.version + " flags " + d.flags);
    EXPECT_EQ(w.rc, d.rc);
    EXPECT_EQ(w.status, d.status);
    EXPECT_EQ(w.sym, d.sym) << "the same ABI variant";
    EXPECT_EQ(d.lib == "-" ? "-" : d.lib, d.lib == "-" ? "-" : "libcuda.so.1");
    if (d.sym != "-" && hooked.count(d.sym)) {
      EXPECT_EQ(w.lib, "libgpushare-cuda.so");
      ++wrapped;
    } else {
      EXPECT_EQ(w.lib, d.lib) << "not hooked: the driver's own pointer";
    }
  }
  EXPECT_GT(wrapped, 40);
  auto find = [&](const std::string& name, const std::string& version, const std::string& flags) {
    for (const Answer& a : with)
      if (a.name == name && a.version == version && a.flags == flags) return a;
    return Answer{};
  };
  // The runtime's first lookup and its self-lookups land on the wrappers.
  EXPECT_EQ(with[0].lib, "libgpushare-cuda.so");
  EXPECT_EQ(with[0].sym, "cuGetProcAddress_v2");
  EXPECT_EQ(find("cuGetProcAddress", "12000", "0").sym, "cuGetProcAddress_v2");
  EXPECT_EQ(find("cuGetProcAddress", "11030", "0").sym, "cuGetProcAddress");
  EXPECT_EQ(find("cuLaunchKernel", "7000", "2").sym, "cuLaunchKernel_ptsz");
  EXPECT_EQ(find("cuLaunchKernel", "7000", "2").lib, "libgpushare-cuda.so");
  EXPECT_EQ(find("cuMemAlloc", "3020", "0").sym, "cuMemAlloc_v2");
  EXPECT_EQ(find("cuMemAllocAsync", "11020", "2").sym, "cuMemAllocAsync_ptsz");
  EXPECT_EQ(find("cuGraphLaunch", "10000", "2").sym, "cuGraphLaunch_ptsz");
  EXPECT_EQ(find("cuGraphLaunch", "10000", "2").lib, "libgpushare-cuda.so");
}

TEST_F(Replay, WithoutALimitEveryPointerIsTheDrivers) {
  ProbeResult r = RunProbe(ProbeBin("cuda-replay"), ProbeEnv(dir_, true), {Sequence()});
  std::vector<Answer> with = Parse(r);
  ASSERT_EQ(with.size(), driver_.size());
  for (size_t i = 0; i < with.size(); ++i) {
    EXPECT_EQ(with[i].lib, driver_[i].lib) << with[i].name;
    EXPECT_EQ(with[i].sym, driver_[i].sym) << with[i].name;
  }
}

TEST_F(Replay, CallsThroughRuntimePointersReachTheRequestedVariant) {
  Env env = ProbeEnv(dir_, true, {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}, {"PROBE_MODE", "runtime"}});
  ProbeResult r = RunProbe(ProbeBin("cuda-probe-dlopen"), env,
                           {"init", "ctx 0", "launch kernel_ptsz 3 1000", "launch kernel 2 1000",
                            "async_ptsz 1024", "calls cuLaunchKernel_ptsz", "calls cuLaunchKernel",
                            "calls cuMemAllocAsync_ptsz", "calls cuMemAllocAsync"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.Num("calls", 0, 0), 3u);
  EXPECT_EQ(r.Num("calls", 0, 1), 2u);
  EXPECT_EQ(r.Num("calls", 0, 2), 1u);
  EXPECT_EQ(r.Num("calls", 0, 3), 0u);
}

}  // namespace
}  // namespace gpushare::interpose::testing
