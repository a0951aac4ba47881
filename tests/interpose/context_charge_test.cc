// What a CUDA context is charged (interpose/context_charge.h): measured on the running driver,
// so that the container's real usage never exceeds its limit (issue: an H200 context costs
// 518 MiB against the 300 MiB the interposer used to charge, letting every container exceed
// its share by 218 MiB). The fake driver's contexts take `context_overhead_mib` of "physical"
// memory, and the fake NVML's `cuda_device` key makes its used memory follow it, as the real
// NVML sees every context.
#include "interpose/context_charge.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "interpose/config.h"
#include "tests/interpose/probe.h"

namespace gpushare::interpose::testing {
namespace {

// ---- the decision (pure) ---------------------------------------------------------------------

TEST(DecideContextCharge, ABelievableMeasurementIsCharged) {
  ContextChargeInput in;
  in.measured = true;
  in.used_before = 10 * GiB;
  in.used_after = 10 * GiB + 518 * MiB;
  ContextCharge c = DecideContextCharge(in);
  EXPECT_EQ(c.bytes, 518 * MiB);
  EXPECT_EQ(c.source, ChargeSource::kMeasured);
  EXPECT_EQ(c.measured, 518 * MiB);
  EXPECT_STREQ(ChargeSourceName(c.source), "measured");
}

TEST(DecideContextCharge, NeverLessThanTheContainersEarlierReading) {
  ContextChargeInput in;
  in.measured = true;
  in.used_before = 10 * GiB;
  in.used_after = 10 * GiB + 118 * MiB;  // a neighbour freed 400 MiB during the creation
  in.earlier = 518 * MiB;
  ContextCharge c = DecideContextCharge(in);
  EXPECT_EQ(c.bytes, 518 * MiB);
  EXPECT_EQ(c.source, ChargeSource::kEarlier);
  EXPECT_EQ(c.measured, 118 * MiB) << "the region keeps this context's own reading";
  in.used_after = 10 * GiB + 600 * MiB;  // higher than before: this reading wins
  c = DecideContextCharge(in);
  EXPECT_EQ(c.bytes, 600 * MiB);
  EXPECT_EQ(c.source, ChargeSource::kMeasured);
  EXPECT_EQ(c.measured, 600 * MiB);
}

TEST(DecideContextCharge, ADisturbedReadingFallsBackInOrder) {
  ContextChargeInput in;
  in.measured = true;
  in.used_before = 10 * GiB;
  in.used_after = 10 * GiB + 1 * MiB;  // below the plausible floor: nothing reported
  EXPECT_EQ(DecideContextCharge(in).source, ChargeSource::kDefault);
  EXPECT_EQ(DecideContextCharge(in).bytes, kDefaultContextOverhead);
  in.used_after = in.used_before - 2 * GiB;  // a neighbour freed meanwhile
  EXPECT_EQ(DecideContextCharge(in).source, ChargeSource::kDefault);
  in.used_after = in.used_before + 20 * GiB;  // a neighbour allocated meanwhile
  EXPECT_EQ(DecideContextCharge(in).source, ChargeSource::kDefault);
  in.overhead_set = true;
  in.overhead = 600 * MiB;
  EXPECT_EQ(DecideContextCharge(in).bytes, 600 * MiB);
  EXPECT_EQ(DecideContextCharge(in).source, ChargeSource::kOverride);
  in.earlier = 520 * MiB;  // an earlier measurement on this device wins over the override
  EXPECT_EQ(DecideContextCharge(in).bytes, 520 * MiB);
  EXPECT_EQ(DecideContextCharge(in).source, ChargeSource::kEarlier);
  in.earlier = 3;  // garbage in the region is not believed either
  EXPECT_EQ(DecideContextCharge(in).source, ChargeSource::kOverride);
}

TEST(DecideContextCharge, FixedNeverMeasures) {
  ContextChargeInput in;
  in.fixed = true;
  in.measured = true;
  in.used_before = 0;
  in.used_after = 518 * MiB;
  EXPECT_EQ(DecideContextCharge(in).bytes, kDefaultContextOverhead);
  EXPECT_EQ(DecideContextCharge(in).source, ChargeSource::kFixed);
  in.overhead_set = true;
  in.overhead = 0;
  EXPECT_EQ(DecideContextCharge(in).bytes, 0u);
}

TEST(DecideContextCharge, ConfigKeys) {
  Config c;
  const char text[] = "context_charge=fixed\ncontext_overhead=256m\n";
  ParseConfigText(text, sizeof(text) - 1, &c);
  EXPECT_TRUE(c.context_charge_fixed);
  EXPECT_TRUE(c.context_overhead_set);
  EXPECT_EQ(c.context_overhead, 256 * MiB);
  Config d;
  const char bad[] = "context_charge=sometimes\n";
  ParseConfigText(bad, sizeof(bad) - 1, &d);
  EXPECT_FALSE(d.context_charge_fixed);
  EXPECT_FALSE(d.fail_closed) << "not a limit: a warning, measurement kept";
  EXPECT_NE(std::string(d.problem).find("context_charge"), std::string::npos) << d.problem;
  EXPECT_FALSE(d.context_overhead_set);
}

// ---- on the fake driver ----------------------------------------------------------------------

const char* const kDev0 = "GPU-fa4e0000-0000-0000-0000-000000000000";

class ContextChargeProbe : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(ProbeBin("cuda-probe-linked").c_str(), X_OK) != 0 ||
        access((FakesDir() + "/nvml/libnvidia-ml.so.1").c_str(), R_OK) != 0)
      GTEST_SKIP() << "SKIPPED: the probe or the fake NVML is not built";
    // The H200 of docs/gpu-checks.md: a context costs 518 MiB.
    dir_.Write("fake.conf", "devices=1\ncontext_overhead_mib=518\n");
    dir_.Write("nvml.conf", std::string("gpu uuid=") + kDev0 +
                                " memory_mib=81920 used_mib=1024 cuda_device=0\n");
  }
  // `nvml`: whether NVML can be loaded (a driver that reports nothing usable when false).
  Env Extra(bool nvml, const Env& more = {}) {
    Env e = {{"CUDA_DEVICE_MEMORY_LIMIT", "4g"},
             {"FAKE_NVML_CONFIG", dir_.File("nvml.conf")},
             {"LD_LIBRARY_PATH", FakesDir() + "/cuda" + (nvml ? ":" + FakesDir() + "/nvml" : "")}};
    for (const auto& [k, v] : more) e[k] = v;
    return e;
  }
  // Allocates 64 MiB pieces until refused; returns this process's physical usage then (bytes).
  uint64_t FillAndMeasure(const Env& extra, uint64_t* charge, uint64_t* source) {
    std::vector<std::string> cmds = {"init", "ctx 0"};
    for (int i = 0; i < 80; ++i) cmds.push_back("alloc 67108864");
    cmds.push_back("phys 0");
    ProbeResult r = RunProbe(ProbeBin("cuda-probe-linked"), ProbeEnv(dir_, true, extra), cmds);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.Rc("alloc", 79), 0) << "the limit refused an allocation";
    RegionView v(dir_.File("region"));
    *charge = v.ok() ? v->devices[0].context_charge : 0;
    *source = v.ok() ? v->devices[0].context_charge_source : 0;
    return r.Num("phys", 1);
  }
  ScratchDir dir_;
};

TEST_F(ContextChargeProbe, MeasuredChargeKeepsRealUsageWithinTheLimit) {
  uint64_t charge = 0, source = 0;
  uint64_t real = FillAndMeasure(Extra(true), &charge, &source);
  EXPECT_EQ(charge, 518 * MiB);
  EXPECT_EQ(source, static_cast<uint64_t>(ChargeSource::kMeasured));
  EXPECT_LE(real, 4 * GiB) << "the process's real usage (context + allocations) within 4 GiB";
  EXPECT_GT(real, 4 * GiB - 64 * MiB) << "and the share used up to its last piece";
}

TEST_F(ContextChargeProbe, AFixedEstimateBelowTheRealCostOverCommits) {
  // What the interposer did before: 300 MiB charged for a 518 MiB context. Kept as the proof
  // that the measurement matters (and that `context_charge=fixed` does what it says).
  uint64_t charge = 0, source = 0;
  uint64_t real =
      FillAndMeasure(Extra(true, {{"GPUSHARE_CONTEXT_CHARGE", "fixed"}}), &charge, &source);
  EXPECT_EQ(charge, 300 * MiB);
  EXPECT_EQ(source, static_cast<uint64_t>(ChargeSource::kFixed));
  EXPECT_GT(real, 4 * GiB) << "218 MiB of real memory past the share";
}

TEST_F(ContextChargeProbe, WithoutNvmlTheOverrideThenAnEarlierMeasurementApply) {
  uint64_t charge = 0, source = 0;
  uint64_t real =
      FillAndMeasure(Extra(false, {{"GPUSHARE_CONTEXT_OVERHEAD", "600m"}}), &charge, &source);
  EXPECT_EQ(charge, 600 * MiB);
  EXPECT_EQ(source, static_cast<uint64_t>(ChargeSource::kOverride));
  EXPECT_LE(real, 4 * GiB);
  // A process of the same container measured the context; a later one that cannot measure
  // (no NVML in its library path) takes that figure, not the override. The region is kept
  // between them by a process holding it open.
  RunningProbe holder =
      StartProbe(ProbeBin("cuda-probe-linked"), ProbeEnv(dir_, true, Extra(true)));
  holder.Send("init");
  holder.Send("ctx 0");
  ASSERT_EQ(holder.WaitFor("ctx ").substr(0, 6), "ctx 0 ");
  {
    RegionView v(dir_.File("region"));
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->devices[0].context_measured, 518 * MiB);
  }
  ProbeResult r =
      RunProbe(ProbeBin("cuda-probe-linked"),
               ProbeEnv(dir_, true, Extra(false, {{"GPUSHARE_CONTEXT_OVERHEAD", "600m"}})),
               {"init", "ctx 0", "meminfo"});
  ASSERT_EQ(r.status, 0) << r.err;
  RegionView v(dir_.File("region"));
  EXPECT_EQ(v->devices[0].context_charge, 518 * MiB);
  EXPECT_EQ(v->devices[0].context_charge_source, static_cast<uint64_t>(ChargeSource::kEarlier));
  holder.Send("exit");
  holder.Wait();
}

TEST_F(ContextChargeProbe, EveryContextIsMeasuredAndReleased) {
  // Two contexts in one process (a primary and a created one): each measured, each charged;
  // destroying the created one gives its charge back.
  RunningProbe p = StartProbe(ProbeBin("cuda-probe-linked"), ProbeEnv(dir_, true, Extra(true)));
  p.Send("init");
  p.Send("ctx 0");
  p.WaitFor("ctx ");
  RegionView v(dir_.File("region"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.Used(0), 518 * MiB);
  p.Send("ctxcreate 0");
  std::string created = p.WaitFor("ctxcreate ");
  ASSERT_EQ(created.substr(0, 12), "ctxcreate 0 ") << created;
  EXPECT_EQ(v.Used(0), 2 * 518 * MiB);
  p.Send("ctxdestroy " + created.substr(12));
  p.WaitFor("ctxdestroy ");
  EXPECT_EQ(v.Used(0), 518 * MiB);
  p.Send("exit");
  p.Wait();
}

TEST_F(ContextChargeProbe, ProcessesOfOneContainerHoldTogetherToOneLimit) {
  // Three processes sharing the region (one container), each with its own 518 MiB context,
  // each taking up to 2 GiB in 64 MiB pieces: their real usage together (the fake driver's state
  // file is the one GPU they share) stays within the 6 GiB limit, contexts included.
  dir_.Write("fake.conf",
             "devices=1\ncontext_overhead_mib=518\nstate_file=" + dir_.File("gpu") + "\n");
  std::vector<RunningProbe> procs;
  for (int i = 0; i < 3; ++i) {
    procs.push_back(
        StartProbe(ProbeBin("cuda-probe-linked"),
                   ProbeEnv(dir_, true, Extra(true, {{"CUDA_DEVICE_MEMORY_LIMIT", "6g"}}))));
    RunningProbe& p = procs.back();
    p.Send("init");
    p.Send("ctx 0");
    ASSERT_EQ(p.WaitFor("ctx ").substr(0, 6), "ctx 0 ");
    for (int k = 0; k < 32; ++k) {
      p.Send("alloc 67108864");
      if (p.WaitFor("alloc ").substr(0, 8) != "alloc 0 ") break;
    }
  }
  // phys: all tenants, this process, the high-water mark of all tenants.
  std::vector<std::string> phys = procs[0].Ask("phys 0");
  ASSERT_EQ(phys.size(), 5u);
  EXPECT_LE(std::stoull(phys[4]), 6 * GiB) << "never more real memory than the limit";
  EXPECT_GT(std::stoull(phys[2]), 6 * GiB - 64 * MiB) << "and the limit used up to the last piece";
  // A fourth process: its context would not fit, so it is refused before the driver makes it.
  RunningProbe late =
      StartProbe(ProbeBin("cuda-probe-linked"),
                 ProbeEnv(dir_, true, Extra(true, {{"CUDA_DEVICE_MEMORY_LIMIT", "6g"}})));
  late.Send("init");
  late.Send("ctx 0");
  EXPECT_EQ(late.WaitFor("ctx ").substr(0, 6), "ctx 2 ") << "CUDA_ERROR_OUT_OF_MEMORY";
  phys = late.Ask("phys 0");
  ASSERT_EQ(phys.size(), 5u);
  EXPECT_LE(std::stoull(phys[4]), 6 * GiB);
  late.Send("exit");
  late.Wait();
  for (RunningProbe& p : procs) {
    p.Send("exit");
    p.Wait();
  }
}

}  // namespace
}  // namespace gpushare::interpose::testing
