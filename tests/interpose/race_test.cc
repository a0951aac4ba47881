// Many processes, one limit, hundreds of rounds (the regression test for HAMi-core PR #273):
// eight probes on one simulated GPU (the fake's shared state) all allocate at the same instant
// each round, through different APIs and lookup paths. Every round exactly one wins, and the
// memory the driver actually held never exceeded the limit at any moment (the fake's
// high-water mark, updated inside each allocation).
#include <gtest/gtest.h>
#include <pthread.h>

#include <string>
#include <vector>

#include "tests/interpose/probe.h"

namespace gpushare::interpose::testing {
namespace {

TEST(Race, ProcessesRacingForOneLimitNeverExceedIt) {
  ScratchDir dir;
  dir.Write("fake.conf", "devices=1\nstate_file=" + dir.File("gpu") + "\n");
  constexpr int kProcs = 8;
  constexpr int kRounds = 200;
  {
    int fd = open(dir.File("barrier").c_str(), O_RDWR | O_CREAT, 0666);
    ASSERT_EQ(ftruncate(fd, sizeof(pthread_barrier_t)), 0);
    void* m = mmap(nullptr, sizeof(pthread_barrier_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    pthread_barrierattr_t a;
    pthread_barrierattr_init(&a);
    pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(static_cast<pthread_barrier_t*>(m), &a, kProcs);
    munmap(m, sizeof(pthread_barrier_t));
  }
  struct Who {
    const char* bin;
    const char* mode;
    const char* api;
  } who[kProcs] = {
      {"cuda-probe-linked", "", "alloc"},        {"cuda-probe-dlopen", "runtime", "alloc"},
      {"cuda-probe-dlopen", "dlsym", "managed"}, {"cuda-probe-linked", "", "vmm"},
      {"cuda-probe-dlopen", "runtime", "async"}, {"cuda-probe-linked", "", "alloc"},
      {"cuda-probe-dlopen", "runtime", "vmm"},   {"cuda-probe-linked", "", "managed"}};
  std::vector<RunningProbe> procs;
  for (const Who& w : who) {
    Env extra = {{"CUDA_DEVICE_MEMORY_LIMIT", "4g"}, {"GPUSHARE_CONTEXT_OVERHEAD", "0"}};
    if (w.mode[0] != '\0') extra["PROBE_MODE"] = w.mode;
    procs.push_back(StartProbe(ProbeBin(w.bin), ProbeEnv(dir, true, extra)));
    procs.back().Send("init");
    procs.back().Send("ctx 0");
    procs.back().Send("race " + std::to_string(kRounds) + " 3221225472 " + dir.File("barrier") +
                      " " + w.api);
  }
  std::vector<std::string> traces;
  int total = 0;
  for (RunningProbe& p : procs) {
    std::string line = p.WaitFor("race ");
    std::istringstream in(line);
    std::string verb, rc, wins, trace;
    in >> verb >> rc >> wins >> trace;
    ASSERT_EQ(rc, "0") << line;
    ASSERT_EQ(trace.size(), static_cast<size_t>(kRounds)) << line;
    EXPECT_EQ(trace.find('E'), std::string::npos) << "only successes and OUT_OF_MEMORY: " << trace;
    total += std::stoi(wins);
    traces.push_back(trace);
  }
  for (int round = 0; round < kRounds; ++round) {
    int winners = 0;
    for (const std::string& t : traces) winners += t[static_cast<size_t>(round)] == '1';
    ASSERT_EQ(winners, 1) << "round " << round;
  }
  EXPECT_EQ(total, kRounds);
  procs[0].Send("phys 0");
  std::istringstream phys(procs[0].WaitFor("phys "));
  std::string verb, rc;
  uint64_t all = 0, mine = 0, high = 0;
  phys >> verb >> rc >> all >> mine >> high;
  EXPECT_EQ(high, 3 * GiB) << "never more than one 3 GiB allocation held at once (limit 4 GiB)";
  EXPECT_EQ(all, 0u);
  for (RunningProbe& p : procs) {
    p.Send("exit");
    EXPECT_EQ(p.Wait(), 0);
  }
}

}  // namespace
}  // namespace gpushare::interpose::testing
