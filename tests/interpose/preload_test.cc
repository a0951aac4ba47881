// The deployment path: /etc/ld.so.preload loads the library into a process whose environment
// is gone (a `su -` or `ssh` session: HAMi#1090), and /etc/gpushare/config still sets its
// limit. Runs in a private mount namespace over a copy of /etc (needs root and unshare; skipped
// otherwise), so the machine's own /etc is never touched.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/interpose/probe.h"

namespace gpushare::interpose::testing {
namespace {

TEST(Preload, LdSoPreloadAndTheFixedConfigSurviveALostEnvironment) {
  if (geteuid() != 0 || system("unshare --mount true >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "SKIPPED: needs root and unshare --mount";
  if (access("/etc/gpushare", F_OK) == 0)
    GTEST_SKIP() << "SKIPPED: this machine has a real /etc/gpushare";
  ScratchDir dir;
  dir.Write("fake.conf", "devices=1\n");
  std::string etc = dir.File("etc");
  ASSERT_EQ(
      system(("cp -a /etc '" + etc + "' 2>/dev/null; mkdir -p '" + etc + "/gpushare'").c_str()), 0);
  std::ofstream(etc + "/ld.so.preload") << InterposerPath() << "\n";
  std::ofstream(etc + "/gpushare/config")
      << "version=1\nregion=" << dir.File("region") << "\nmemory_limit=64m\ncontext_overhead=0\n";
  // env -i: no LD_PRELOAD, no CUDA_DEVICE_MEMORY_LIMIT, nothing but the fake driver's location.
  std::string script = "mount --bind '" + etc + "' /etc && exec env -i LD_LIBRARY_PATH='" +
                       FakesDir() + "/cuda' FAKE_CUDA_CONFIG='" + dir.File("fake.conf") + "' '" +
                       ProbeBin("cuda-probe-linked") +
                       "' init 'ctx 0' 'alloc 33554432' 'alloc 67108864' meminfo";
  std::string out = dir.File("out");
  int rc =
      system(("unshare --mount --propagation private sh -c \"" + script + "\" >'" + out + "' 2>&1")
                 .c_str());
  ASSERT_EQ(rc, 0);
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("alloc 0 "), std::string::npos) << text;
  EXPECT_NE(text.find("alloc 2 0x0"), std::string::npos) << "the 64 MiB limit applies: " << text;
  EXPECT_NE(text.find("meminfo 0 " + std::to_string(32 * MiB) + " " + std::to_string(64 * MiB)),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace gpushare::interpose::testing
