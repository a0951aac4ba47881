// Property test: random sequences of every allocation API, with random sizes, against the fake
// driver's ground truth. After each operation the interposer's charge for the process equals
// what the driver holds for it, whether the operation succeeded or was refused; with a tight
// limit the driver never held more than the limit.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/interpose/probe.h"

namespace gpushare::interpose::testing {
namespace {

std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string t; in >> t;) w.push_back(t);
  return w;
}

// `fake` sets how the driver pads and grows; with the driver behaving as the interposer's
// estimates assume (512-byte pitch, block-linear arrays, pools growing by the large page) the
// driver's high-water mark must stay under a tight limit; with a driver that pads and grows
// more, only the charges are compared (its extra is found late, undone, and refused).
void RunSequence(uint64_t seed, const std::string& limit, uint64_t limit_bytes, int steps,
                 const std::string& fake) {
  ScratchDir dir;
  dir.Write("fake.conf", "devices=1\ncontext_overhead_mib=32\n" + fake);
  RunningProbe p = StartProbe(
      ProbeBin("cuda-probe-linked"),
      ProbeEnv(dir, true,
               {{"CUDA_DEVICE_MEMORY_LIMIT", limit}, {"GPUSHARE_CONTEXT_OVERHEAD", "32m"}}));
  auto cmd = [&](const std::string& c) {
    p.Send(c);
    return Words(p.WaitFor(c.substr(0, c.find(' ')) + " "));
  };
  cmd("init");
  cmd("ctx 0");
  std::mt19937_64 rng(seed);
  std::map<std::string, std::vector<std::string>> live;  // kind -> handles
  std::string pool = cmd("poolcreate 0")[2];
  auto size = [&]() -> uint64_t {
    switch (rng() % 4) {
      case 0:
        return 1 + rng() % 4096;
      case 1:
        return 4096 + rng() % (1 << 20);
      case 2:
        return (1ull << 20) + rng() % (16ull << 20);
      default:
        return (16ull << 20) + rng() % (64ull << 20);
    }
  };
  for (int i = 0; i < steps; ++i) {
    std::string c;
    std::string kind;
    int op = static_cast<int>(rng() % 14);
    auto take = [&](const std::string& k) -> std::string {
      auto& v = live[k];
      if (v.empty()) return "";
      size_t at = rng() % v.size();
      std::string h = v[at];
      v.erase(v.begin() + static_cast<long>(at));
      return h;
    };
    switch (op) {
      case 0:
        c = "alloc " + std::to_string(size());
        kind = "linear";
        break;
      case 1:
        c = "pitch " + std::to_string(1 + rng() % 9000) + " " + std::to_string(1 + rng() % 3000) +
            " 4";
        kind = "linear";
        break;
      case 2:
        c = "managed " + std::to_string(size());
        kind = "linear";
        break;
      case 3:
        c = "array " + std::to_string(1 + rng() % 4000) + " " + std::to_string(rng() % 4000) +
            " 32 " + std::to_string(1 + rng() % 4);
        kind = "array";
        break;
      case 4:
        c = "mip " + std::to_string(1 + rng() % 2048) + " " + std::to_string(1 + rng() % 2048) +
            " 0 " + std::to_string(1 + rng() % 6);
        kind = "mip";
        break;
      case 5:
        c = "async " + std::to_string(size());
        kind = "async";
        break;
      case 6:
        c = "poolalloc " + pool + " " + std::to_string(size());
        kind = "async";
        break;
      case 7:
        c = "sync";
        break;
      case 8:
        c = "vmmcreate " + std::to_string((1 + rng() % 8) * (2ull << 20)) + " 0";
        kind = "vmm";
        break;
      case 9:
        c = "pooltrim " + pool + " " + std::to_string(rng() % (32ull << 20));
        break;
      default: {  // frees
        static const char* kinds[] = {"linear", "array", "mip", "async", "vmm"};
        static const char* verbs[] = {"free", "arrayfree", "mipfree", "asyncfree", "vmmrelease"};
        int k = static_cast<int>(rng() % 5);
        std::string h = take(kinds[k]);
        if (h.empty()) continue;
        c = std::string(verbs[k]) + " " + h;
      }
    }
    std::vector<std::string> w = cmd(c);
    ASSERT_GE(w.size(), 2u) << c;
    ASSERT_TRUE(w[1] == "0" || w[1] == "2") << c << " -> rc " << w[1];
    if (w[1] == "0" && !kind.empty() && w.size() > 2) live[kind].push_back(w[2]);
    std::vector<std::string> ph = cmd("phys 0");
    RegionView region(dir.File("region"));
    ASSERT_EQ(region.Used(0), std::stoull(ph[3])) << "seed " << seed << " step " << i << ": " << c;
    if (limit_bytes != 0) {
      ASSERT_LE(std::stoull(ph[4]), limit_bytes) << "driver high water";
    }
  }
  p.Send("exit");
  p.Wait();
}

TEST(RandomSequences, ChargesMatchTheDriverWithRoomToSpare) {
  for (uint64_t seed = 1; seed <= 3; ++seed)
    RunSequence(seed, "64g", 0, 250, "pitch_align=1024\npool_chunk_kib=8192\n");
}

TEST(RandomSequences, ChargesMatchTheDriverAtATightLimit) {
  for (uint64_t seed = 11; seed <= 13; ++seed) RunSequence(seed, "200m", 200 * MiB, 250, "");
  for (uint64_t seed = 21; seed <= 22; ++seed)
    RunSequence(seed, "200m", 0, 250, "pitch_align=2048\npool_chunk_kib=16384\narray_pad_kib=64\n");
}

}  // namespace
}  // namespace gpushare::interpose::testing
