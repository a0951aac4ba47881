// gpu_checks: the small CUDA programs behind tests/gpu/run-gpu-checks.sh, one binary with a
// subcommand per check. Every subcommand prints one JSON object per line on stdout.
//
//   routing <sequence file>        cuGetProcAddress answers vs dlsym of the versioned names
//   limits <api> <chunk MiB>       allocate until refused: malloc async pool pitch array3d
//                                  managed vmm; reports chunks, the error, cudaMemGetInfo
//   meminfo                        cudaMemGetInfo and NVML v1/v2 (dlopen libnvidia-ml.so.1)
//   mkbarrier <file> <n>           a process-shared barrier for `race`
//   race <rounds> <MiB> <barrier>  two-process race (see the script)
//   hold <MiB>                     allocate and wait to be killed
//   overhead                       ns per cudaMalloc/Free, MallocAsync/FreeAsync, empty launch
//   spin <seconds> <graph 0|1>     compute-bound kernels back to back; completed work per second
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

static void MemInfoJson(const char* tag) {
  size_t f = 0, t = 0;
  cudaError_t e = cudaMemGetInfo(&f, &t);
  printf("{\"check\":\"meminfo\",\"at\":\"%s\",\"rc\":%d,\"free_mib\":%zu,\"total_mib\":%zu}\n", tag, e,
         f >> 20, t >> 20);
}

__global__ void Empty() {}

__global__ void Spin(long long cycles, int* sink) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
  if (threadIdx.x == 0 && sink != nullptr) atomicAdd(sink, 1);
}

static int Routing(const char* path) {
  cuInit(0);
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) h = dlopen("libcuda.so.1", RTLD_NOW);
  std::ifstream in(path);
  std::string line;
  int checked = 0, same = 0, differ = 0;
  // The interposer's table: (name, version, flags) -> exported symbol. Check that the driver's
  // pointer for a request equals dlsym of the symbol our table selects for the hooked names.
  const char* pairs[][4] = {
      {"cuMemAlloc", "3020", "0", "cuMemAlloc_v2"},        {"cuMemFree", "3020", "0", "cuMemFree_v2"},
      {"cuMemGetInfo", "3020", "0", "cuMemGetInfo_v2"},    {"cuCtxCreate", "3020", "0", "cuCtxCreate_v2"},
      {"cuLaunchKernel", "4000", "0", "cuLaunchKernel"},   {"cuLaunchKernel", "7000", "2", "cuLaunchKernel_ptsz"},
      {"cuMemAllocAsync", "11020", "2", "cuMemAllocAsync_ptsz"},
      {"cuMemAllocAsync", "11020", "0", "cuMemAllocAsync"},
      {"cuGraphLaunch", "10000", "2", "cuGraphLaunch_ptsz"}, {"cuMemAllocPitch", "3020", "0", "cuMemAllocPitch_v2"},
      {"cuArrayCreate", "3020", "0", "cuArrayCreate_v2"},  {"cuDeviceTotalMem", "3020", "0", "cuDeviceTotalMem_v2"},
      {"cuMemCreate", "10020", "0", "cuMemCreate"},        {"cuGetProcAddress", "12000", "0", "cuGetProcAddress_v2"},
      {"cuDevicePrimaryCtxRelease", "11000", "0", "cuDevicePrimaryCtxRelease_v2"},
      {"cuLaunchKernelEx", "11060", "2", "cuLaunchKernelEx_ptsz"},
      {"cuLaunchCooperativeKernel", "9000", "0", "cuLaunchCooperativeKernel"}};
  for (auto& p : pairs) {
    void* viagpa = nullptr;
    CUdriverProcAddressQueryResult st;
    cuGetProcAddress(p[0], &viagpa, atoi(p[1]), strtoull(p[2], nullptr, 10), &st);
    void* viadlsym = dlsym(h, p[3]);
    ++checked;
    if (viagpa == viadlsym) ++same;
    else ++differ;
    printf("{\"check\":\"routing\",\"request\":\"%s@%s/%s\",\"symbol\":\"%s\",\"identical\":%s}\n", p[0], p[1],
           p[2], p[3], viagpa == viadlsym ? "true" : "false");
  }
  int resolved = 0, total = 0;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string name;
    int v = 0;
    unsigned long long fl = 0;
    if (!(ls >> name >> v >> fl)) continue;
    ++total;
    void* ptr = nullptr;
    CUdriverProcAddressQueryResult st;
    if (cuGetProcAddress(name.c_str(), &ptr, v, fl, &st) == CUDA_SUCCESS && ptr != nullptr) ++resolved;
  }
  printf("{\"check\":\"routing\",\"pointer_identity\":{\"checked\":%d,\"identical\":%d,\"different\":%d},"
         "\"recorded_requests\":%d,\"resolved\":%d}\n",
         checked, same, differ, total, resolved);
  return 0;
}

static int Limits(const std::string& api, size_t chunk_mib) {
  size_t chunk = chunk_mib << 20;
  cudaFree(nullptr);  // create the context
  MemInfoJson("start");
  std::vector<void*> ptrs;
  cudaError_t last = cudaSuccess;
  CUresult drv = CUDA_SUCCESS;
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaMemPool_t pool = nullptr;
  if (api == "pool") {
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPoolCreate(&pool, &props);
  }
  CUdeviceptr va = 0;
  size_t va_size = 64ull << 30, mapped = 0;
  if (api == "vmm") cuMemAddressReserve(&va, va_size, 0, 0, 0);
  // VMM maps 2 MiB pieces: enough iterations to pass any limit up to the reserved 64 GiB.
  const int max_steps = api == "vmm" ? static_cast<int>(va_size >> 21) : 1024;
  for (int i = 0; i < max_steps; ++i) {
    void* p = nullptr;
    if (api == "malloc") last = cudaMalloc(&p, chunk);
    else if (api == "async") last = cudaMallocAsync(&p, chunk, s);
    else if (api == "pool") last = cudaMallocFromPoolAsync(&p, chunk, pool, s);
    else if (api == "managed") last = cudaMallocManaged(&p, chunk);
    else if (api == "pitch") {
      size_t pitch = 0;
      last = cudaMallocPitch(&p, &pitch, 1 << 20, chunk_mib);
    } else if (api == "array3d") {
      cudaArray_t a = nullptr;
      cudaChannelFormatDesc d = cudaCreateChannelDesc<float4>();
      last = cudaMalloc3DArray(&a, &d, make_cudaExtent(1024, 1024, chunk_mib / 16 == 0 ? 1 : chunk_mib / 16));
      p = a;
    } else if (api == "vmm") {
      CUmemAllocationProp prop = {};
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = 0;
      CUmemGenericAllocationHandle h;
      drv = cuMemCreate(&h, 2ull << 20, &prop, 0);  // PyTorch expandable segments: 2 MiB pieces
      if (drv != CUDA_SUCCESS) break;
      cuMemMap(va + mapped, 2ull << 20, 0, h, 0);
      CUmemAccessDesc acc = {};
      acc.location = prop.location;
      acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      cuMemSetAccess(va + mapped, 2ull << 20, &acc, 1);
      mapped += 2ull << 20;
      if (mapped >= va_size) break;
      continue;
    }
    if (last != cudaSuccess) break;
    cudaStreamSynchronize(s);
    ptrs.push_back(p);
  }
  size_t got = api == "vmm" ? mapped >> 20 : ptrs.size() * chunk_mib;
  printf("{\"check\":\"limits\",\"api\":\"%s\",\"chunk_mib\":%zu,\"allocated_mib\":%zu,\"refusal\":\"%s\","
         "\"driver_rc\":%d}\n",
         api.c_str(), chunk_mib, got, cudaGetErrorName(last), static_cast<int>(drv));
  MemInfoJson("full");
  return 0;
}

static int MemInfo() {
  cudaFree(nullptr);
  MemInfoJson("now");
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (h == nullptr) return 0;
  struct M1 {
    unsigned long long total, free, used;
  } m1 = {};
  struct M2 {
    unsigned version;
    unsigned long long total, reserved, free, used;
  } m2 = {};
  m2.version = static_cast<unsigned>(sizeof(M2)) | (2u << 24);
  auto init = reinterpret_cast<int (*)()>(dlsym(h, "nvmlInit_v2"));
  auto get = reinterpret_cast<int (*)(unsigned, void**)>(dlsym(h, "nvmlDeviceGetHandleByIndex_v2"));
  auto v1 = reinterpret_cast<int (*)(void*, M1*)>(dlsym(h, "nvmlDeviceGetMemoryInfo"));
  auto v2 = reinterpret_cast<int (*)(void*, M2*)>(dlsym(h, "nvmlDeviceGetMemoryInfo_v2"));
  void* dev = nullptr;
  if (init == nullptr || init() != 0 || get(0, &dev) != 0) return 0;
  int r1 = v1(dev, &m1), r2 = v2 != nullptr ? v2(dev, &m2) : -1;
  printf("{\"check\":\"nvml\",\"v1\":{\"rc\":%d,\"total_mib\":%llu,\"free_mib\":%llu,\"used_mib\":%llu},"
         "\"v2\":{\"rc\":%d,\"total_mib\":%llu,\"reserved_mib\":%llu,\"free_mib\":%llu,\"used_mib\":%llu}}\n",
         r1, m1.total >> 20, m1.free >> 20, m1.used >> 20, r2, m2.total >> 20, m2.reserved >> 20, m2.free >> 20,
         m2.used >> 20);
  return 0;
}

static int Race(int rounds, size_t mib, const char* barrier_path) {
  int fd = open(barrier_path, O_RDWR);
  auto* b = static_cast<pthread_barrier_t*>(
      mmap(nullptr, sizeof(pthread_barrier_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  cudaFree(nullptr);
  int wins = 0;
  std::string trace;
  for (int r = 0; r < rounds; ++r) {
    pthread_barrier_wait(b);
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, mib << 20);
    pthread_barrier_wait(b);
    if (e == cudaSuccess) {
      ++wins;
      cudaFree(p);
    }
    trace += e == cudaSuccess ? '1' : '0';
    pthread_barrier_wait(b);
  }
  printf("{\"check\":\"race\",\"wins\":%d,\"trace\":\"%s\"}\n", wins, trace.c_str());
  return 0;
}

static int Hold(size_t mib) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, mib << 20);
  printf("{\"check\":\"hold\",\"rc\":%d}\n", e);
  fflush(stdout);
  for (;;) pause();
}

static int Overhead() {
  cudaFree(nullptr);
  const int n = 10000;
  double t0 = Now();
  for (int i = 0; i < n; ++i) {
    void* p;
    cudaMalloc(&p, 1 << 20);
    cudaFree(p);
  }
  double malloc_ns = (Now() - t0) / n * 1e9;
  cudaStream_t s;
  cudaStreamCreate(&s);
  t0 = Now();
  for (int i = 0; i < n; ++i) {
    void* p;
    cudaMallocAsync(&p, 1 << 20, s);
    cudaFreeAsync(p, s);
  }
  cudaStreamSynchronize(s);
  double async_ns = (Now() - t0) / n * 1e9;
  const int launches = 200000;
  Empty<<<1, 1, 0, s>>>();
  cudaStreamSynchronize(s);
  t0 = Now();
  for (int i = 0; i < launches; ++i) Empty<<<1, 1, 0, s>>>();
  cudaStreamSynchronize(s);
  double launch_ns = (Now() - t0) / launches * 1e9;
  printf("{\"check\":\"overhead\",\"malloc_free_ns\":%.1f,\"async_pair_ns\":%.1f,\"empty_launch_ns\":%.1f}\n",
         malloc_ns, async_ns, launch_ns);
  return 0;
}

static int SpinFor(double seconds, int graph) {
  int sms = 0, clock_khz = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  long long cycles = static_cast<long long>(clock_khz) * 2;  // ~2 ms per kernel
  int* sink = nullptr;
  cudaMalloc(&sink, sizeof(int));
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaGraph_t g;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    Spin<<<sms * 4, 128, 0, s>>>(cycles, sink);
    cudaStreamEndCapture(s, &g);
    cudaGraphInstantiate(&exec, g, 0);
  }
  double t0 = Now();
  long kernels = 0;
  while (Now() - t0 < seconds) {
    for (int i = 0; i < 20; ++i, ++kernels) {
      if (graph) cudaGraphLaunch(exec, s);
      else Spin<<<sms * 4, 128, 0, s>>>(cycles, sink);
    }
    cudaStreamSynchronize(s);
  }
  double elapsed = Now() - t0;
  printf("{\"check\":\"spin\",\"graph\":%d,\"sms\":%d,\"kernels\":%ld,\"seconds\":%.2f,\"kernels_per_s\":%.1f,"
         "\"nominal_kernel_ms\":2}\n",
         graph, sms, kernels, elapsed, static_cast<double>(kernels) / elapsed);
  return 0;
}

static int MakeBarrier(const char* path, int n) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0666);
  if (fd < 0 || ftruncate(fd, sizeof(pthread_barrier_t)) != 0) return 1;
  auto* b = static_cast<pthread_barrier_t*>(
      mmap(nullptr, sizeof(pthread_barrier_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  pthread_barrierattr_t a;
  pthread_barrierattr_init(&a);
  pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  return pthread_barrier_init(b, &a, static_cast<unsigned>(n));
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::string c = argv[1];
  if (c == "mkbarrier" && argc > 3) return MakeBarrier(argv[2], atoi(argv[3]));
  if (c == "routing" && argc > 2) return Routing(argv[2]);
  if (c == "limits" && argc > 3) return Limits(argv[2], static_cast<size_t>(atol(argv[3])));
  if (c == "meminfo") return MemInfo();
  if (c == "race" && argc > 4) return Race(atoi(argv[2]), static_cast<size_t>(atol(argv[3])), argv[4]);
  if (c == "hold" && argc > 2) return Hold(static_cast<size_t>(atol(argv[2])));
  if (c == "overhead") return Overhead();
  if (c == "spin" && argc > 3) return SpinFor(atof(argv[2]), atoi(argv[3]));
  fprintf(stderr, "gpu_checks: unknown or incomplete command\n");
  return 2;
}
