// libgpushare-cuda.so end to end: the built library preloaded into probe programs that drive the
// fake driver. Every assertion compares what the interposer decided with the fake driver's
// ground truth (what it really allocated, which implementation each call reached).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "tests/interpose/probe.h"

namespace gpushare::interpose::testing {
namespace {

const char* const kDev0 = "GPU-fa4e0000-0000-0000-0000-000000000000";
const char* const kDev1 = "GPU-fa4e0000-0000-0000-0000-000000000001";

class Interposer : public ::testing::Test {
 protected:
  void SetUp() override { dir_.Write("fake.conf", "devices=2\n"); }

  Env Limits(const std::string& memory, Env extra = {}) {
    extra["CUDA_DEVICE_MEMORY_LIMIT"] = memory;
    if (extra.count("GPUSHARE_CONTEXT_OVERHEAD") == 0) extra["GPUSHARE_CONTEXT_OVERHEAD"] = "0";
    return extra;
  }
  ProbeResult Run(const std::vector<std::string>& cmds, const Env& extra,
                  const std::string& bin = "cuda-probe-linked", bool preload = true) {
    return RunProbe(ProbeBin(bin), ProbeEnv(dir_, preload, extra), cmds);
  }

  ScratchDir dir_;
};

// The three ways a program reaches the driver all lead to the wrappers: a refused allocation
// never reaches the driver and leaves nothing allocated.
TEST_F(Interposer, LinkedDlsymAndRuntimeLookupsAreAllIntercepted) {
  struct Way {
    const char* bin;
    const char* mode;
  } ways[] = {
      {"cuda-probe-linked", ""}, {"cuda-probe-dlopen", "dlsym"}, {"cuda-probe-dlopen", "runtime"}};
  for (const Way& way : ways) {
    SCOPED_TRACE(std::string(way.bin) + " " + way.mode);
    Env env = Limits("64m");
    if (way.mode[0] != '\0') env["PROBE_MODE"] = way.mode;
    ProbeResult r = Run({"init", "ctx 0", "alloc 33554432", "alloc 33554432", "alloc 512",
                         "calls cuMemAlloc_v2", "live", "mode"},
                        env, way.bin);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.Rc("alloc", 0), 0);
    EXPECT_EQ(r.Rc("alloc", 1), 0) << "exactly the limit fits";
    EXPECT_EQ(r.Rc("alloc", 2), 2) << "CUDA_ERROR_OUT_OF_MEMORY";
    EXPECT_EQ(r.Num("calls"), 2u) << "the refused allocation never reached the driver";
    EXPECT_EQ(r.Num("live"), 2u);
  }
}

TEST_F(Interposer, WithoutALimitNothingChanges) {
  ProbeResult r = Run({"init", "ctx 0", "alloc 10737418240", "meminfo", "totalmem 0", "phys 0"},
                      {{"UNSET:CUDA_DEVICE_MEMORY_SHARED_CACHE", ""}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.Rc("alloc"), 0);
  EXPECT_EQ(r.Num("totalmem"), 80 * GiB);
  EXPECT_EQ(r.Num("meminfo", 1), 80 * GiB);
  EXPECT_EQ(r.Num("meminfo", 0), 70 * GiB);
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_NE(access(dir_.File("region").c_str(), F_OK), 0) << "no region without a limit";
}

// After every step the interposer's charge equals the bytes the fake driver really holds for
// this process, for every allocation API: pitch chosen by the driver (2048-byte alignment,
// twice the estimate), padded arrays, pools that grow in 32 MiB chunks and keep freed memory
// until a synchronisation or trim, VMM memory alive until released AND unmapped, retained
// handles, external memory, graph memory, contexts and their allocations.
TEST_F(Interposer, ChargesEqualTheDriversFootprintForEveryApi) {
  dir_.Write("fake.conf",
             "devices=2\npitch_align=2048\npool_chunk_kib=32768\narray_pad_kib=64\ncontext_"
             "overhead_mib=64\n");
  Env env = Limits("40g", {{"GPUSHARE_CONTEXT_OVERHEAD", "64m"}});
  RunningProbe p = StartProbe(ProbeBin("cuda-probe-linked"), ProbeEnv(dir_, true, env));
  std::vector<std::string> vars;  // values captured from earlier outputs
  auto step = [&](const std::string& cmd) -> std::vector<std::string> {
    std::string c = cmd;
    for (size_t i = vars.size(); i-- > 0;) {  // $10 before $1
      std::string key = "$" + std::to_string(i);
      for (size_t at; (at = c.find(key)) != std::string::npos;) c.replace(at, key.size(), vars[i]);
    }
    p.Send(c);
    std::string verb = c.substr(0, c.find(' '));
    std::string line = p.WaitFor(verb + " ");
    std::istringstream in(line);
    std::vector<std::string> w;
    for (std::string t; in >> t;) w.push_back(t);
    EXPECT_GE(w.size(), 2u) << c;
    if (w.size() >= 2) {
      EXPECT_EQ(w[1], "0") << c << " -> " << line;
    }
    p.Send("phys 0");
    std::istringstream ph(p.WaitFor("phys "));
    std::vector<std::string> pw;
    for (std::string t; ph >> t;) pw.push_back(t);
    uint64_t truth = pw.size() > 3 ? std::stoull(pw[3]) : ~0ull;
    RegionView region(dir_.File("region"));
    EXPECT_EQ(region.Used(0), truth) << "after `" << c << "`";
    return w;
  };
  auto keep = [&](const std::vector<std::string>& w, size_t i = 2) {
    vars.push_back(w.size() > i ? w[i] : "0");
  };
  step("init");
  step("ctx 0");                         // 64 MiB context
  keep(step("alloc 1000"));              // $0
  keep(step("alloc 3145729"));           // $1
  keep(step("pitch 1000 2048 4"));       // $2: pitch 2048, not the 1024 estimate
  keep(step("managed 5242880"));         // $3
  keep(step("array 1000 1000 32 4"));    // $4: padded
  keep(step("array3d 64 64 64 1 1 0"));  // $5
  keep(step("mip 512 512 0 4"));         // $6
  keep(step("async 1048576"));           // $7: the default pool grows by 32 MiB
  keep(step("async 1048576"));           // $8: no growth
  step("asyncfree $7");
  step("asyncfree $8");                 // memory stays in the pool...
  step("sync");                         // ...until the synchronisation releases it
  keep(step("poolcreate 0"));           // $9
  keep(step("poolalloc $9 41943040"));  // $10: grows by 64 MiB
  step("poolthreshold $9 134217728");
  step("asyncfree $10");
  step("sync");                        // kept: under the release threshold
  step("pooltrim $9 0");               // released by the trim
  keep(step("poolalloc $9 1048576"));  // $11
  step("pooldestroy $9");              // destroyed with an allocation out
  step("asyncfree $11");               // the pool goes with its last allocation
  keep(step("vmmcreate 4194304 0"));   // $12
  keep(step("vareserve 4194304"));     // $13
  step("map $13 4194304 $12");
  step("vmmrelease $12");             // still mapped: still there
  step("unmap $13 4194304");          // released and unmapped: gone
  keep(step("vmmcreate 2097152 0"));  // $14
  keep(step("vareserve 2097152"));    // $15
  step("map $15 2097152 $14");
  keep(step("retain $15"));  // $16 (== $14)
  step("vmmrelease $14");
  step("unmap $15 2097152");         // one reference left
  step("vmmrelease $16");            // now freed
  keep(step("extimport 10485760"));  // $17
  step("extdestroy $17");
  step("graph 6291456 0 2");  // graph memory: 6 MiB reserved at launch
  step("graphtrim 0");
  keep(step("ctxcreate 0"));    // $18: a second context, current now
  keep(step("alloc 8388608"));  // $19, made in that context
  step("ctxdestroy $18");       // frees it and the context
  step("ctx 0");
  step("free $0");
  step("free $1");
  step("free $2");
  step("arrayfree $4");
  step("ctxreset 0");  // frees everything left in the primary
  p.Send("exit");
  EXPECT_EQ(p.Wait(), 0);
}

TEST_F(Interposer, RefusalsLeaveNothingAllocatedEvenWhenTheFootprintIsKnownLate) {
  dir_.Write("fake.conf", "devices=1\npitch_align=2048\npool_chunk_kib=32768\narray_pad_kib=64\n");
  // Each case: a limit the estimate fits in but the driver's real footprint does not.
  struct Case {
    const char* limit;
    const char* cmd;
    const char* undo_calls;  // the driver function that must have undone the allocation
  } cases[] = {
      {"3m", "pitch 1000 2048 4", "cuMemFree_v2"},  // estimate 2 MiB, real 4 MiB
      {"96k", "array 1 1 32 4", "cuArrayDestroy"},  // estimate 64 KiB, real 128 KiB
      {"16m", "async 1048576", "cuMemFreeAsync"},   // the pool grows by 32 MiB
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.cmd);
    ProbeResult r =
        Run({"init", "ctx 0", c.cmd, "live", "phys 0", std::string("calls ") + c.undo_calls},
            Limits(c.limit));
    ASSERT_EQ(r.status, 0) << r.err;
    std::string verb = std::string(c.cmd).substr(0, std::string(c.cmd).find(' '));
    EXPECT_EQ(r.Rc(verb), 2);
    EXPECT_EQ(r.Num("live"), 0u);
    EXPECT_EQ(r.Num("phys", 1), 0u) << "the driver holds nothing for this process";
    EXPECT_EQ(r.Num("calls"), 1u);
    RegionView region(dir_.File("region"));
    EXPECT_EQ(region.Used(0), 0u);
  }
  // Refused before the driver is called at all.
  ProbeResult r =
      Run({"init", "ctx 0", "vmmcreate 4194304 0", "managed 3145728", "calls cuMemCreate",
           "calls cuMemAllocManaged", "extimport 4194304", "mip 1024 1024 0 8", "live"},
          Limits("2m"));
  EXPECT_EQ(r.Rc("vmmcreate"), 2);
  EXPECT_EQ(r.Rc("managed"), 2);
  EXPECT_EQ(r.Num("calls", 0, 0), 0u);
  EXPECT_EQ(r.Num("calls", 0, 1), 0u);
  EXPECT_EQ(r.Rc("extimport"), 2);
  EXPECT_EQ(r.Rc("mip"), 2);
  EXPECT_EQ(r.Num("live"), 0u);
}

TEST_F(Interposer, QueriesReportTheLimitAndTheContainersUsage) {
  ProbeResult r = Run({"init", "ctx 0", "alloc 268435456", "meminfo", "totalmem 0", "totalmem 1"},
                      Limits("1g", {{"CUDA_DEVICE_MEMORY_LIMIT_1", "0"}}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.Num("meminfo", 1), 1 * GiB);
  EXPECT_EQ(r.Num("meminfo", 0), 768 * MiB);
  EXPECT_EQ(r.Num("totalmem", 0, 0), 1 * GiB);
  EXPECT_EQ(r.Num("totalmem", 0, 1), 80 * GiB) << "device 1 is not limited";
}

TEST_F(Interposer, ATinyLimitNeverTurnsQueriesIntoErrors) {
  // HAMi#1370: a limit below the context overhead made cudaMemGetInfo fail.
  ProbeResult r = Run({"init", "ctx 0", "meminfo", "alloc 1048576", "meminfo"},
                      Limits("16m", {{"GPUSHARE_CONTEXT_OVERHEAD", "300m"}}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.Rc("meminfo"), 0);
  EXPECT_EQ(r.Num("meminfo", 0), 0u) << "free";
  EXPECT_EQ(r.Num("meminfo", 1), 16 * MiB) << "total";
  EXPECT_EQ(r.Rc("alloc"), 2);
  EXPECT_EQ(r.Rc("meminfo", 1), 0);
}

TEST_F(Interposer, FreeMemoryAlsoReflectsOtherTenantsOfTheGpu) {
  dir_.Write("fake.conf", "devices=1\nstate_file=" + dir_.File("gpu-state") + "\n");
  // Another container (another region, no limit) takes 79.5 GiB of the 80 GiB GPU.
  RunningProbe other = StartProbe(ProbeBin("cuda-probe-linked"), ProbeEnv(dir_, false));
  other.Send("init");
  other.Send("ctx 0");
  other.Send("alloc 85362475008");
  ASSERT_EQ(other.WaitFor("alloc "), "alloc 0 0x7f0000000000");
  ProbeResult r = Run({"init", "ctx 0", "meminfo"}, Limits("4g"));
  EXPECT_EQ(r.Num("meminfo", 1), 4 * GiB);
  EXPECT_EQ(r.Num("meminfo", 0), 512 * MiB) << "min(limit - used, what the GPU has left)";
  other.Send("exit");
  other.Wait();
}

TEST_F(Interposer, TheConfigFileWinsAndMatchesDevicesByUuid) {
  // Device 0 of the process is the GPU the config calls device.1 and vice versa (as with
  // CUDA_VISIBLE_DEVICES=1,0): limits follow the UUID, not the index.
  dir_.Write("config", std::string("version=1\nregion=") + dir_.File("region") +
                           "\ndevice.0.uuid=" + kDev1 +
                           "\ndevice.0.memory_limit=64m\ndevice.1.uuid=" + kDev0 +
                           "\ndevice.1.memory_limit=1g\ncontext_overhead=0\n");
  Env env = {{"GPUSHARE_CONFIG", dir_.File("config")},
             {"CUDA_DEVICE_MEMORY_LIMIT", "100g"},  // ignored: the file wins
             {"UNSET:CUDA_DEVICE_MEMORY_SHARED_CACHE", ""}};
  ProbeResult r =
      Run({"init", "ctx 0", "alloc 104857600", "ctx 1", "alloc 104857600", "meminfo"}, env);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.Rc("alloc", 0), 0) << "GPU 0 has the 1 GiB limit";
  EXPECT_EQ(r.Rc("alloc", 1), 2) << "GPU 1 has the 64 MiB limit";
  EXPECT_EQ(r.Num("meminfo", 1), 64 * MiB);
}

TEST_F(Interposer, AnUnreadableConfigRefusesAllocationsButNotQueries) {
  dir_.Write("config", "version=1\ndevice.0.memory_limit=lots\n");
  ProbeResult r =
      Run({"init", "ctx 0", "alloc 1024", "meminfo"}, {{"GPUSHARE_CONFIG", dir_.File("config")}});
  EXPECT_EQ(r.Rc("alloc"), 2);
  EXPECT_EQ(r.Rc("meminfo"), 0);
  EXPECT_NE(r.err.find("device.0.memory_limit"), std::string::npos) << r.err;
}

TEST_F(Interposer, AForkedChildGetsItsOwnSlotAndInheritsNoUsage) {
  RunningProbe p = StartProbe(ProbeBin("cuda-probe-linked"), ProbeEnv(dir_, true, Limits("1g")));
  p.Send("init");
  p.Send("ctx 0");
  p.Send("alloc 104857600");
  p.WaitFor("alloc ");
  p.Send("forkhold 209715200");
  std::string line = p.WaitFor("forkhold ");
  ASSERT_EQ(line.substr(0, 11), "forkhold 0 ") << line;
  pid_t child = static_cast<pid_t>(std::stol(line.substr(11)));
  {
    RegionView region(dir_.File("region"));
    EXPECT_EQ(region.Used(0), 300 * MiB);
    int live = 0;
    for (const RegionSlot& s : region->slots) live += s.pid != 0;
    EXPECT_EQ(live, 2);
  }
  p.Send("alloc 838860800");
  EXPECT_EQ(p.WaitFor("alloc "), "alloc 2 0x0");
  kill(child, SIGKILL);
  // Not our child (the probe's): it stays a zombie until the probe reaps it, and a zombie's
  // memory is already gone, so it must count as dead.
  for (int i = 0; i < 100; ++i) {
    char path[64], buf[256] = {};
    snprintf(path, sizeof(path), "/proc/%d/stat", child);
    FILE* f = fopen(path, "r");
    if (f == nullptr) break;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    const char* close_paren = strrchr(buf, ')');
    if (n > 0 && close_paren != nullptr && close_paren[2] == 'Z') break;
    usleep(10000);
  }
  p.Send("meminfo");
  std::string info = p.WaitFor("meminfo ");
  EXPECT_EQ(info, "meminfo 0 " + std::to_string(924 * MiB) + " " + std::to_string(1 * GiB))
      << "the dead child's 200 MiB were reclaimed by the query";
  p.Send("alloc 838860800");
  EXPECT_EQ(p.WaitFor("alloc ").substr(0, 8), "alloc 0 ");
  p.Send("exit");
  p.Wait();
}

TEST_F(Interposer, AKilledProcessesUsageIsReclaimedAtOnce) {
  RunningProbe holder =
      StartProbe(ProbeBin("cuda-probe-linked"), ProbeEnv(dir_, true, Limits("1g")));
  holder.Send("init");
  holder.Send("ctx 0");
  for (int i = 0; i < 3; ++i) holder.Send("alloc 268435456");
  holder.Send("pause");
  ASSERT_EQ(holder.WaitFor("pause"), "pause 0");
  kill(holder.pid, SIGKILL);
  EXPECT_EQ(holder.Wait(), 128 + SIGKILL);
  auto start = std::chrono::steady_clock::now();
  ProbeResult r = Run({"init", "ctx 0", "meminfo", "alloc 1073741824"}, Limits("1g"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(r.Num("meminfo", 0), 1 * GiB) << "the query reclaimed the dead process's 768 MiB";
  EXPECT_EQ(r.Rc("alloc"), 0) << "the whole limit is available again";
}

TEST_F(Interposer, ThirtyTwoThreadsAllocatingConcurrentlyKeepExactAccounts) {
  ProbeResult r = Run({"init", "ctx 0", "churn 32 300 3000000", "phys 0"}, Limits("64m"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.Rc("churn"), 0);
  EXPECT_LE(r.Num("phys", 2), 64 * MiB) << "high water of what the driver held";
  RegionView region(dir_.File("region"));
  EXPECT_EQ(region.Used(0), 0u);
}

TEST_F(Interposer, VmmWithoutAContextOnAWorkerThreadIsCounted) {
  // PyTorch expandable segments call cuMemCreate from threads without a current context
  // (HAMi-core PR #172); the fake's cuCtxGetDevice fails off the main thread.
  dir_.Write("fake.conf", "devices=1\nctx_device_fails_off_main_thread=1\n");
  ProbeResult r =
      Run({"init", "ctx 0", "thread vmmcreate 4194304 0", "thread vmmcreate 4194304 0", "live"},
          Limits("6m"));
  EXPECT_EQ(r.Rc("vmmcreate", 0), 0);
  EXPECT_EQ(r.Rc("vmmcreate", 1), 2);
  EXPECT_EQ(r.Num("live"), 1u);
}

TEST_F(Interposer, UnknownPointersAreForwardedWithTheDriversAnswer) {
  ProbeResult r =
      Run({"init", "ctx 0", "free 0x1234", "asyncfree 0x5678", "arrayfree 0x9abc"}, Limits("1g"));
  EXPECT_EQ(r.Rc("free"), 1) << "CUDA_ERROR_INVALID_VALUE from the driver, never -1";
  EXPECT_EQ(r.Rc("asyncfree"), 1);
  EXPECT_EQ(r.Rc("arrayfree"), 400);
}

TEST_F(Interposer, IpcImportsAreCountedOnlyByPolicy) {
  RunningProbe p =
      StartProbe(ProbeBin("cuda-probe-linked"),
                 ProbeEnv(dir_, true, Limits("1g", {{"GPUSHARE_IPC_IMPORTS", "count"}})));
  p.Send("init");
  p.Send("ctx 0");
  p.Send("alloc 67108864");
  std::string a = p.WaitFor("alloc ");
  std::string ptr = a.substr(a.rfind(' ') + 1);
  p.Send("ipcopen " + ptr);
  std::string o = p.WaitFor("ipcopen ");
  EXPECT_EQ(o.substr(0, 10), "ipcopen 0 ");
  {
    RegionView region(dir_.File("region"));
    EXPECT_EQ(region.Used(0), 128 * MiB) << "counted once here under ipc_imports=count";
  }
  p.Send("ipcclose " + o.substr(o.rfind(' ') + 1));
  p.WaitFor("ipcclose ");
  RegionView region(dir_.File("region"));
  EXPECT_EQ(region.Used(0), 64 * MiB);
  p.Send("exit");
  p.Wait();
}

TEST_F(Interposer, SmLimitBracketsEveryLaunchKindAndThrottles) {
  Env env = {{"CUDA_DEVICE_SM_LIMIT", "25"}};
  auto t0 = std::chrono::steady_clock::now();
  ProbeResult r = Run({"init", "ctx 0", "launch kernel 24 1000000", "launch kernel_ptsz 4 1000000",
                       "launch ex 4 1000000", "launch ex_ptsz 4 1000000", "launch coop 4 1000000",
                       "launch coop_ptsz 4 1000000", "graph 0 0 4", "graph 0 0 4 ptsz",
                       "calls cuEventRecord", "calls cuEventRecord_ptsz", "capture begin",
                       "launch kernel 3 1000", "capture end", "calls cuEventRecord"},
                      env);
  auto elapsed = std::chrono::steady_clock::now() - t0;
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.Num("calls", 0, 0), 2u * (24 + 4 + 4 + 4));  // kernel, ex, coop, graph
  EXPECT_EQ(r.Num("calls", 0, 1), 2u * (4 + 4 + 4 + 4));   // the _ptsz variants
  EXPECT_EQ(r.Num("calls", 0, 2), r.Num("calls", 0, 0)) << "captured launches are not bracketed";
  RegionView region(dir_.File("region"));
  EXPECT_GT(region->devices[0].sm_bucket.delayed, 0u);
  EXPECT_GT(region->devices[0].sm_bucket.waited_ns, 0u);
  // 44 ms of kernels at 25% need at least (44 - 2) / 0.25 - 20 (the gate's burst) = 148 ms: a
  // lower bound, which a slow machine cannot break.
  EXPECT_GE(elapsed, std::chrono::milliseconds(148));
}

TEST_F(Interposer, WithoutAnSmLimitLaunchesAreUntouched) {
  ProbeResult r = Run({"init", "ctx 0", "launch kernel 10 1000", "graph 0 0 3",
                       "calls cuEventRecord", "calls cuLaunchKernel", "calls cuGraphLaunch"},
                      Limits("1g"));
  EXPECT_EQ(r.Num("calls", 0, 0), 0u);
  EXPECT_EQ(r.Num("calls", 0, 1), 10u);
  EXPECT_EQ(r.Num("calls", 0, 2), 3u);
}

// The time of the last launch (RegionDevice::last_launch_s, for gpushare-node's /metrics) is
// noted with or without an SM limit, for kernels and graphs, in whole wall-clock seconds.
TEST_F(Interposer, LaunchesNoteTheirTimeInTheRegion) {
  const auto now = [] {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
  };
  const uint64_t before = now();
  ProbeResult r = Run({"init", "ctx 0", "alloc 1048576"}, Limits("1g"));
  ASSERT_EQ(r.status, 0) << r.err;
  {
    RegionView region(dir_.File("region"));
    ASSERT_TRUE(region.ok());
    EXPECT_EQ(region->devices[0].last_launch_s, 0u) << "no launch yet";
  }
  r = Run({"init", "ctx 0", "launch kernel 3 1000"}, Limits("1g"));
  ASSERT_EQ(r.status, 0) << r.err;
  RegionView region(dir_.File("region"));
  EXPECT_GE(region->devices[0].last_launch_s, before);
  EXPECT_LE(region->devices[0].last_launch_s, now());
  r = Run({"init", "ctx 0", "graph 0 0 1"}, Limits("1g"));
  ASSERT_EQ(r.status, 0) << r.err;
  RegionView again(dir_.File("region"));
  EXPECT_GE(again->devices[0].last_launch_s, before) << "graph launches count too";
}

TEST_F(Interposer, DlsymNextIsAnsweredRelativeToItsCaller) {
  Env env = ProbeEnv(dir_, true, Limits("1g"));
  ProbeResult r = RunProbe(ProbeBin("dlsym-next-probe"), env, {});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_FALSE(r.lines.empty());
  EXPECT_EQ(r.lines[0], "next 102") << "RTLD_NEXT from library A must find library B";
  EXPECT_EQ(r.Rc("strlen"), 1) << "non-CUDA symbols come back untouched";
  EXPECT_EQ(r.Rc("missing"), 1);
}

// Stream-ordered pairs in the steady state (PyTorch's and vLLM's hot path): once the device's
// pool is known and holds room, an allocation neither asks the driver which pool a pointer came
// from nor takes the region's lock, and the charge still equals what the pool holds.
TEST_F(Interposer, SteadyStreamOrderedPairsTakeTheFastPath) {
  dir_.Write("fake.conf", "devices=1\npool_chunk_kib=32768\n");
  RunningProbe p = StartProbe(ProbeBin("cuda-probe-linked"), ProbeEnv(dir_, true, Limits("1g")));
  auto calls = [&](const std::string& fn) { return std::stoull(p.Ask("calls " + fn).at(2)); };
  p.Ask("init");
  p.Ask("ctx 0");
  std::string first = p.Ask("async 1048576").at(2);  // learns the default pool; it grows 32 MiB
  p.Ask("asyncfree " + first);
  const uint64_t lookups = calls("cuPointerGetAttribute");
  const uint64_t devices = calls("cuCtxGetDevice");
  RegionView region(dir_.File("region"));
  for (int i = 0; i < 100; ++i) {
    std::vector<std::string> a = p.Ask("async 1048576");
    ASSERT_EQ(a.at(1), "0");
    ASSERT_EQ(p.Ask("asyncfree " + a.at(2)).at(1), "0");
  }
  EXPECT_EQ(calls("cuPointerGetAttribute"), lookups) << "the pool was known";
  EXPECT_EQ(calls("cuCtxGetDevice"), devices) << "the context's device was known";
  EXPECT_EQ(region.Used(0), 32 * MiB) << "the pool's reserved bytes stay charged";
  EXPECT_EQ(std::stoull(p.Ask("phys 0").at(3)), 32 * MiB);
  // Live allocations past the pool's room go the careful way and grow the charge with it.
  std::vector<std::string> held;
  for (int i = 0; i < 20; ++i) held.push_back(p.Ask("async 2097152").at(2));
  EXPECT_EQ(region.Used(0), 64 * MiB);
  EXPECT_EQ(std::stoull(p.Ask("phys 0").at(3)), 64 * MiB);
  for (const std::string& h : held) p.Ask("asyncfree " + h);
  p.Ask("sync");
  EXPECT_EQ(region.Used(0), 0u) << "released with the pool's memory";
  // The limit holds on the fast path too: 1 GiB in 2 MiB pieces, the next one refused.
  held.clear();
  for (int i = 0; i < 513; ++i) held.push_back(p.Ask("async 2097152").at(1));
  EXPECT_EQ(std::count(held.begin(), held.end(), "0"), 512);
  EXPECT_EQ(held.back(), "2") << "CUDA_ERROR_OUT_OF_MEMORY";
  EXPECT_LE(std::stoull(p.Ask("phys 0").at(4)), 1 * GiB) << "never more than the limit held";
  p.Send("exit");
  p.Wait();
}

// An allocation on a stream being captured is graph memory, not the pool's: it never takes the
// fast path (the pointer's own pool is asked for), even when the pool is known and has room.
TEST_F(Interposer, CapturedStreamOrderedAllocationsTakeTheCarefulPath) {
  dir_.Write("fake.conf", "devices=1\npool_chunk_kib=32768\n");
  RunningProbe p = StartProbe(ProbeBin("cuda-probe-linked"), ProbeEnv(dir_, true, Limits("1g")));
  auto calls = [&](const std::string& fn) { return std::stoull(p.Ask("calls " + fn).at(2)); };
  p.Ask("init");
  p.Ask("ctx 0");
  p.Ask("asyncfree " + p.Ask("async 1048576").at(2));  // the pool learnt, 30 MiB of room
  const uint64_t before = calls("cuPointerGetAttribute");
  ASSERT_EQ(p.Ask("capture begin").at(1), "0");
  std::vector<std::string> a = p.Ask("async 1048576");
  ASSERT_EQ(a.at(1), "0");
  EXPECT_GT(calls("cuPointerGetAttribute"), before) << "the careful path asked the pointer";
  p.Ask("asyncfree " + a.at(2));
  p.Ask("capture end");
  const uint64_t after_capture = calls("cuPointerGetAttribute");
  p.Ask("asyncfree " + p.Ask("async 1048576").at(2));
  EXPECT_EQ(calls("cuPointerGetAttribute"), after_capture) << "fast again once not capturing";
  p.Send("exit");
  p.Wait();
}

// cuDeviceSetMemPool moves cuMemAllocAsync to another pool: the fast path follows it, so the
// new pool's growth is charged (not taken for room in the old one).
TEST_F(Interposer, SetMemPoolMovesTheFastPathToTheNewPool) {
  dir_.Write("fake.conf", "devices=1\npool_chunk_kib=32768\n");
  RunningProbe p = StartProbe(ProbeBin("cuda-probe-linked"), ProbeEnv(dir_, true, Limits("1g")));
  p.Ask("init");
  p.Ask("ctx 0");
  std::string a = p.Ask("async 1048576").at(2);  // the default pool: 32 MiB, 30 of them free
  p.Ask("asyncfree " + a);
  std::string pool = p.Ask("poolcreate 0").at(2);
  ASSERT_EQ(p.Ask("setpool 0 " + pool).at(1), "0");
  std::string b = p.Ask("async 1048576").at(2);
  EXPECT_EQ(std::stoull(p.Ask("poolreserved " + pool).at(2)), 32 * MiB) << "from the new pool";
  RegionView region(dir_.File("region"));
  EXPECT_EQ(region.Used(0), 64 * MiB) << "both pools' reserved bytes";
  EXPECT_EQ(std::stoull(p.Ask("phys 0").at(3)), 64 * MiB);
  p.Ask("asyncfree " + b);
  p.Send("exit");
  p.Wait();
}

}  // namespace
}  // namespace gpushare::interpose::testing
