// cuGetProcAddress resolution: the exact ABI for (name, cudaVersion, flags), never "the highest
// suffix", and the per-thread variant only when it is the same ABI.
#include "interpose/entry_points.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "interpose/hooks.h"

namespace gpushare::interpose {
namespace {

std::string Resolve(const char* base, int version, uint64_t flags) {
  bool low = false;
  const char* e = ResolveEntryPoint(base, version, flags, &low);
  return e == nullptr ? (low ? "<too-low>" : "<none>") : e;
}

TEST(EntryPoints, VersionSelectsTheAbi) {
  EXPECT_EQ(Resolve("cuMemAlloc", 3020, 0), "cuMemAlloc_v2");
  EXPECT_EQ(Resolve("cuMemAlloc", 2000, 0), "cuMemAlloc");
  EXPECT_EQ(Resolve("cuMemAlloc", 13000, 0), "cuMemAlloc_v2");
  // HAMi-core PR #320: cuCtxCreate@3020 must not be the _v3 affinity form.
  EXPECT_EQ(Resolve("cuCtxCreate", 3020, 0), "cuCtxCreate_v2");
  EXPECT_EQ(Resolve("cuCtxCreate", 11040, 0), "cuCtxCreate_v3");
  EXPECT_EQ(Resolve("cuCtxCreate", 12000, 0), "cuCtxCreate_v3");
  EXPECT_EQ(Resolve("cuCtxCreate", 13000, 0), "cuCtxCreate_v4");
  EXPECT_EQ(Resolve("cuGetProcAddress", 11030, 0), "cuGetProcAddress");
  EXPECT_EQ(Resolve("cuGetProcAddress", 12000, 0), "cuGetProcAddress_v2");
  EXPECT_EQ(Resolve("cuDevicePrimaryCtxRelease", 7000, 0), "cuDevicePrimaryCtxRelease");
  EXPECT_EQ(Resolve("cuDevicePrimaryCtxRelease", 11000, 0), "cuDevicePrimaryCtxRelease_v2");
}

TEST(EntryPoints, PerThreadFlagSelectsTheSameAbisPtszVariant) {
  EXPECT_EQ(Resolve("cuLaunchKernel", 7000, 2), "cuLaunchKernel_ptsz");
  EXPECT_EQ(Resolve("cuLaunchKernel", 7000, 0), "cuLaunchKernel");
  EXPECT_EQ(Resolve("cuLaunchKernel", 7000, 1), "cuLaunchKernel");
  EXPECT_EQ(Resolve("cuLaunchKernel", 4000, 2), "cuLaunchKernel")
      << "no per-thread form before 7.0";
  EXPECT_EQ(Resolve("cuMemAllocAsync", 11020, 2), "cuMemAllocAsync_ptsz");
  EXPECT_EQ(Resolve("cuGraphLaunch", 10000, 2), "cuGraphLaunch_ptsz");
  EXPECT_EQ(Resolve("cuMemcpyHtoD", 3020, 2), "cuMemcpyHtoD_v2");
  EXPECT_EQ(Resolve("cuMemcpyHtoD", 7000, 2), "cuMemcpyHtoD_v2_ptds");
  EXPECT_EQ(Resolve("cuStreamGetCtx", 12050, 2), "cuStreamGetCtx_v2_ptsz");
  EXPECT_EQ(Resolve("cuStreamGetCtx", 12000, 2), "cuStreamGetCtx_ptsz");
  // A per-thread variant of an older ABI is never returned for a newer request.
  EXPECT_EQ(Resolve("cuMemPrefetchAsync", 12020, 2), "cuMemPrefetchAsync_v2_ptsz");
  EXPECT_EQ(Resolve("cuMemPrefetchAsync", 12010, 2), "cuMemPrefetchAsync_ptsz");
}

TEST(EntryPoints, UnknownNamesAndTooOldVersions) {
  EXPECT_EQ(Resolve("cuNoSuchFunction", 13000, 0), "<none>");
  EXPECT_EQ(Resolve("", 0, 0), "<none>");
  EXPECT_EQ(Resolve("cuMemAllocAsync", 11000, 0), "<too-low>");
  bool low = false;
  EXPECT_EQ(ResolveEntryPoint(nullptr, 13000, 0, &low), nullptr);
}

TEST(EntryPoints, EveryHookIsAnExportedAbiInTheTable) {
  int n = 0;
  const EntryPoint* table = EntryPoints(&n);
  std::set<std::string> exported;
  for (int i = 0; i < n; ++i) exported.insert(table[i].exported);
#define GPUSHARE_NAME(name) #name,
  const char* hooks[] = {GPUSHARE_CUDA_HOOKS(GPUSHARE_NAME)};
#undef GPUSHARE_NAME
  for (const char* h : hooks)
    EXPECT_TRUE(exported.count(h)) << h << " is hooked but no request selects it";
}

TEST(EntryPoints, TableIsSortedForBinarySearch) {
  int n = 0;
  const EntryPoint* t = EntryPoints(&n);
  ASSERT_GT(n, 600);
  for (int i = 1; i < n; ++i) EXPECT_LE(std::string(t[i - 1].base), std::string(t[i].base)) << i;
}

TEST(EntryPoints, EveryRecordedRuntimeRequestResolves) {
  std::string path = std::string(GPUSHARE_SHARED_DIR) + "/data/cuda/cudart-13.0-getprocaddress.txt";
  std::ifstream in(path);
  if (!in) GTEST_SKIP() << "SKIPPED: " << path << " absent";
  int lines = 0, resolved = 0;
  std::set<std::string> names;
  for (std::string line; std::getline(in, line);) {
    ++lines;
    std::istringstream ls(line);
    std::string name;
    int version = 0;
    uint64_t flags = 0;
    if (!(ls >> name >> version >> flags)) {  // the runtime's empty probe: " 0 0"
      names.insert("");
      continue;
    }
    names.insert(name);
    bool low = false;
    if (ResolveEntryPoint(name.c_str(), version, flags, &low) != nullptr)
      ++resolved;
    else
      ADD_FAILURE() << name << "@" << version << " flags " << flags << " does not resolve";
  }
  EXPECT_EQ(lines, 440);
  EXPECT_EQ(names.size(), 346u);
  EXPECT_EQ(resolved, 439);
}

}  // namespace
}  // namespace gpushare::interpose
