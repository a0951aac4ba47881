// Added cost of libgpushare-cuda.so per call, against the same call made on the fake driver
// directly, in one process: the fake (build/fakes/cuda/libcuda.so.1) and the interposer are
// dlopen'ed by path and its exported wrappers are called (they forward to the same fake functions).
//
//   interpose_bench                        Google Benchmark: alloc+free pairs with 10..100,000
//                                          live allocations, stream-ordered alloc+free pairs,
//                                          launches, cuMemGetInfo
//   interpose_bench --count <op> <n>       runs one op n times and exits, for callgrind:
//                                          bench/interpose/callgrind.sh turns two runs into
//                                          instructions per call (op: alloc-direct,
//                                          alloc-interposed, async-direct, async-interposed,
//                                          launch-direct, launch-interposed)
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "interpose/cuda_abi.h"

using namespace gpushare::cuda;  // NOLINT

namespace {

using AllocFn = CUresult (*)(CUdeviceptr*, size_t);
using FreeFn = CUresult (*)(CUdeviceptr);
using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);
using InfoFn = CUresult (*)(size_t*, size_t*);
using AsyncFn = CUresult (*)(CUdeviceptr*, size_t, CUstream);
using FreeAsyncFn = CUresult (*)(CUdeviceptr, CUstream);

struct Api {
  AllocFn alloc;
  FreeFn free;
  LaunchFn launch;
  InfoFn info;
  AsyncFn alloc_async;
  FreeAsyncFn free_async;
};
Api g_direct, g_interposed;
CUfunction g_fn = nullptr;

template <typename T>
T Sym(void* h, const char* name) {
  void* p = dlsym(h, name);
  if (p == nullptr) {
    fprintf(stderr, "interpose_bench: %s missing: %s\n", name, dlerror());
    exit(2);
  }
  return reinterpret_cast<T>(p);
}

void Setup() {
  static bool done = false;
  if (done) return;
  done = true;
  // A big fake GPU (the 100,000-allocation case) and a limit that never refuses.
  char conf[] = "/tmp/gpushare-bench-XXXXXX";
  int fd = mkstemp(conf);
  const char text[] = "devices=1\ndevice.0.total_mib=4194304\nkernel_ns=0\n";
  if (fd < 0 || write(fd, text, sizeof(text) - 1) < 0) exit(2);
  close(fd);
  setenv("FAKE_CUDA_CONFIG", conf, 1);
  char region[] = "/tmp/gpushare-bench-region-XXXXXX";
  fd = mkstemp(region);
  close(fd);
  setenv("CUDA_DEVICE_MEMORY_SHARED_CACHE", region, 1);
  setenv("CUDA_DEVICE_MEMORY_LIMIT", "4t", 1);
  setenv("GPUSHARE_CONTEXT_OVERHEAD", "0", 1);
  // By path, so no LD_LIBRARY_PATH is needed; the interposer's dlopen("libcuda.so.1") then finds
  // it loaded (same SONAME).
  std::string fake_path = std::string(GPUSHARE_FAKES_DIR) + "/cuda/libcuda.so.1";
  void* fake = dlopen(fake_path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  std::string lib = std::string(GPUSHARE_LIB_DIR) + "/libgpushare-cuda.so";
  void* ip = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (fake == nullptr || ip == nullptr) {
    fprintf(stderr, "interpose_bench: cannot load the fake driver or %s: %s\n", lib.c_str(),
            dlerror());
    exit(2);
  }
  g_direct = {Sym<AllocFn>(fake, "cuMemAlloc_v2"),   Sym<FreeFn>(fake, "cuMemFree_v2"),
              Sym<LaunchFn>(fake, "cuLaunchKernel"), Sym<InfoFn>(fake, "cuMemGetInfo_v2"),
              Sym<AsyncFn>(fake, "cuMemAllocAsync"), Sym<FreeAsyncFn>(fake, "cuMemFreeAsync")};
  g_interposed = {Sym<AllocFn>(ip, "cuMemAlloc_v2"),   Sym<FreeFn>(ip, "cuMemFree_v2"),
                  Sym<LaunchFn>(ip, "cuLaunchKernel"), Sym<InfoFn>(ip, "cuMemGetInfo_v2"),
                  Sym<AsyncFn>(ip, "cuMemAllocAsync"), Sym<FreeAsyncFn>(ip, "cuMemFreeAsync")};
  Sym<CUresult (*)(unsigned)>(fake, "cuInit")(0);
  CUcontext ctx = nullptr;
  Sym<CUresult (*)(CUcontext*, CUdevice)>(ip, "cuDevicePrimaryCtxRetain")(&ctx, 0);
  Sym<CUresult (*)(CUcontext)>(fake, "cuCtxSetCurrent")(ctx);
  Sym<CUresult (*)(CUfunction*, void*, const char*)>(fake, "cuModuleGetFunction")(&g_fn, nullptr,
                                                                                  "spin_0");
  // Warm up both paths (lazy initialisation, region attach, device probe).
  CUdeviceptr p = 0;
  g_interposed.alloc(&p, 4096);
  g_interposed.free(p);
  g_interposed.alloc_async(&p, 1 << 20, nullptr);
  g_interposed.free_async(p, nullptr);
}

void AllocFree(benchmark::State& state, const Api& api) {
  Setup();
  std::vector<CUdeviceptr> live(static_cast<size_t>(state.range(0)));
  for (CUdeviceptr& p : live) api.alloc(&p, 4096);
  for (auto _ : state) {
    CUdeviceptr p = 0;
    if (api.alloc(&p, 1 << 20) != CUDA_SUCCESS || api.free(p) != CUDA_SUCCESS)
      state.SkipWithError("failed");
    benchmark::DoNotOptimize(p);
  }
  for (CUdeviceptr p : live) api.free(p);
  state.counters["live"] = static_cast<double>(state.range(0));
}

void BM_AllocFree_Direct(benchmark::State& s) {
  AllocFree(s, g_direct);
}
void BM_AllocFree_Interposed(benchmark::State& s) {
  AllocFree(s, g_interposed);
}
BENCHMARK(BM_AllocFree_Direct)->Arg(10)->Arg(1000)->Arg(100000);
BENCHMARK(BM_AllocFree_Interposed)->Arg(10)->Arg(1000)->Arg(100000);

// A stream-ordered pair on the default pool, as PyTorch's and vLLM's allocators make them: the
// pool keeps its memory between pairs, so no pair grows it.
void AsyncPair(benchmark::State& state, const Api& api) {
  Setup();
  for (auto _ : state) {
    CUdeviceptr p = 0;
    if (api.alloc_async(&p, 1 << 20, nullptr) != CUDA_SUCCESS ||
        api.free_async(p, nullptr) != CUDA_SUCCESS)
      state.SkipWithError("failed");
    benchmark::DoNotOptimize(p);
  }
}
void BM_AsyncPair_Direct(benchmark::State& s) {
  AsyncPair(s, g_direct);
}
void BM_AsyncPair_Interposed(benchmark::State& s) {
  AsyncPair(s, g_interposed);
}
BENCHMARK(BM_AsyncPair_Direct);
BENCHMARK(BM_AsyncPair_Interposed);

void Launch(benchmark::State& state, const Api& api) {
  Setup();
  for (auto _ : state) api.launch(g_fn, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
}
void BM_Launch_Direct(benchmark::State& s) {
  Launch(s, g_direct);
}
void BM_Launch_Interposed(benchmark::State& s) {
  Launch(s, g_interposed);
}
BENCHMARK(BM_Launch_Direct);
BENCHMARK(BM_Launch_Interposed);

void Info(benchmark::State& state, const Api& api) {
  Setup();
  size_t f = 0, t = 0;
  for (auto _ : state) api.info(&f, &t);
  benchmark::DoNotOptimize(f);
}
void BM_MemGetInfo_Direct(benchmark::State& s) {
  Info(s, g_direct);
}
void BM_MemGetInfo_Interposed(benchmark::State& s) {
  Info(s, g_interposed);
}
BENCHMARK(BM_MemGetInfo_Direct);
BENCHMARK(BM_MemGetInfo_Interposed);

int Count(const std::string& op, long n) {
  Setup();
  const Api& api = op.find("interposed") != std::string::npos ? g_interposed : g_direct;
  for (long i = 0; i < n; ++i) {
    if (op.rfind("alloc", 0) == 0) {
      CUdeviceptr p = 0;
      api.alloc(&p, 1 << 20);
      api.free(p);
    } else if (op.rfind("async", 0) == 0) {
      CUdeviceptr p = 0;
      api.alloc_async(&p, 1 << 20, nullptr);
      api.free_async(p, nullptr);
    } else {
      api.launch(g_fn, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "--count") == 0) return Count(argv[2], atol(argv[3]));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
