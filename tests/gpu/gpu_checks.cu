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
//   fill <api> <chunk MiB> <ready file> [max MiB]
//                                  allocate until refused (or max), then run kernels on the
//                                  memory (module loading, local memory: what a context takes
//                                  after its creation), write the pid to <ready file>, and wait
//                                  to be killed while the script reads nvidia-smi
//   mix <seconds>                  a kernel mix (short and long compute, a bandwidth-bound copy,
//                                  device-to-device copies); completed units per second
//   gemm <seconds> <n>             cuBLAS SGEMM n x n back to back (built with -DGPUSHARE_CUBLAS)
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

// Allocates `chunk_mib` pieces through `api` until the first refusal. Returns the MiB obtained;
// the pointers (VMM: the mapped range) stay allocated.
struct Filled {
  size_t mib = 0;
  cudaError_t last = cudaSuccess;
  CUresult drv = CUDA_SUCCESS;
  std::vector<void*> ptrs;  // linear memory (malloc, async, pool, pitch, managed)
  CUdeviceptr va = 0;       // vmm: the mapped range [va, va + mib)
};
static Filled AllocUntilRefused(const std::string& api, size_t chunk_mib, size_t max_mib = 0) {
  Filled f;
  size_t chunk = chunk_mib << 20;
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
  size_t va_size = 64ull << 30, mapped = 0;
  if (api == "vmm") cuMemAddressReserve(&f.va, va_size, 0, 0, 0);
  // VMM maps 2 MiB pieces: enough iterations to pass any limit up to the reserved 64 GiB.
  const int max_steps = api == "vmm" ? static_cast<int>(va_size >> 21) : 1024;
  size_t linear = 0;
  for (int i = 0; i < max_steps; ++i) {
    if (max_mib != 0 && (api == "vmm" ? mapped >> 20 : linear) + chunk_mib > max_mib) break;
    void* p = nullptr;
    if (api == "malloc") f.last = cudaMalloc(&p, chunk);
    else if (api == "async") f.last = cudaMallocAsync(&p, chunk, s);
    else if (api == "pool") f.last = cudaMallocFromPoolAsync(&p, chunk, pool, s);
    else if (api == "managed") f.last = cudaMallocManaged(&p, chunk);
    else if (api == "pitch") {
      size_t pitch = 0;
      f.last = cudaMallocPitch(&p, &pitch, 1 << 20, chunk_mib);
    } else if (api == "array3d") {
      cudaArray_t a = nullptr;
      cudaChannelFormatDesc d = cudaCreateChannelDesc<float4>();
      f.last = cudaMalloc3DArray(&a, &d, make_cudaExtent(1024, 1024, chunk_mib / 16 == 0 ? 1 : chunk_mib / 16));
      p = nullptr;  // an array, not linear memory: kept, never touched by kernels
    } else if (api == "vmm") {
      CUmemAllocationProp prop = {};
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = 0;
      CUmemGenericAllocationHandle h;
      f.drv = cuMemCreate(&h, 2ull << 20, &prop, 0);  // PyTorch expandable segments: 2 MiB pieces
      if (f.drv != CUDA_SUCCESS) break;
      cuMemMap(f.va + mapped, 2ull << 20, 0, h, 0);
      CUmemAccessDesc acc = {};
      acc.location = prop.location;
      acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      cuMemSetAccess(f.va + mapped, 2ull << 20, &acc, 1);
      mapped += 2ull << 20;
      if (mapped >= va_size) break;
      continue;
    }
    if (f.last != cudaSuccess) break;
    cudaStreamSynchronize(s);
    if (p != nullptr) f.ptrs.push_back(p);
    linear += chunk_mib;
  }
  f.mib = api == "vmm" ? mapped >> 20 : linear;
  return f;
}

static int Limits(const std::string& api, size_t chunk_mib) {
  cudaFree(nullptr);  // create the context
  MemInfoJson("start");
  Filled f = AllocUntilRefused(api, chunk_mib);
  printf("{\"check\":\"limits\",\"api\":\"%s\",\"chunk_mib\":%zu,\"allocated_mib\":%zu,\"refusal\":\"%s\","
         "\"driver_rc\":%d}\n",
         api.c_str(), chunk_mib, f.mib, cudaGetErrorName(f.last), static_cast<int>(f.drv));
  MemInfoJson("full");
  return 0;
}

// Fills the limit, then uses the memory with kernels (what a real job does next: the context
// loads its modules and sizes its local memory now, after the interposer charged it), then
// waits while the script reads the process's real usage from nvidia-smi.
static int Fill(const std::string& api, size_t chunk_mib, const char* ready, size_t max_mib) {
  cudaError_t ctx = cudaFree(nullptr);  // a context that does not fit the limit is refused
  Filled f = AllocUntilRefused(api, chunk_mib, max_mib);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  for (void* p : f.ptrs) cudaMemset(p, 1, 4096);
  if (f.va != 0 && f.mib != 0) cudaMemset(reinterpret_cast<void*>(f.va), 1, f.mib << 20);
  Empty<<<1, 1>>>();
  Spin<<<sms * 4, 128>>>(1000, nullptr);
  cudaError_t k = cudaDeviceSynchronize();
  printf("{\"check\":\"fill\",\"api\":\"%s\",\"context\":\"%s\",\"chunk_mib\":%zu,\"allocated_mib\":%zu,"
         "\"refusal\":\"%s\",\"kernels\":\"%s\"}\n",
         api.c_str(), cudaGetErrorName(ctx), chunk_mib, f.mib, cudaGetErrorName(f.last), cudaGetErrorName(k));
  fflush(stdout);
  FILE* r = fopen(ready, "w");
  if (r != nullptr) {
    fprintf(r, "%d\n", static_cast<int>(getpid()));
    fclose(r);
  }
  for (;;) pause();
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

__global__ void Copy(const float4* in, float4* out, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = in[i];
}

// A kernel mix as an inference server issues it: many short kernels, a few long ones, a
// bandwidth-bound copy and device-to-device copies, on one stream. Units: each short kernel 1,
// each long one 40, each copy kernel 10, each memcpy 10 (their rough durations in 50 us).
static int Mix(double seconds) {
  int sms = 0, clock_khz = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  long long short_cycles = static_cast<long long>(clock_khz) / 20;  // ~50 us
  long long long_cycles = static_cast<long long>(clock_khz) * 2;    // ~2 ms
  const size_t n = (256ull << 20) / sizeof(float4);
  float4 *a = nullptr, *b = nullptr;
  cudaMalloc(&a, n * sizeof(float4));
  cudaMalloc(&b, n * sizeof(float4));
  cudaStream_t s;
  cudaStreamCreate(&s);
  double t0 = Now();
  long units = 0, rounds = 0;
  while (Now() - t0 < seconds) {
    for (int i = 0; i < 20; ++i) Spin<<<sms, 128, 0, s>>>(short_cycles, nullptr);
    Spin<<<sms * 4, 128, 0, s>>>(long_cycles, nullptr);
    Copy<<<sms * 8, 256, 0, s>>>(a, b, n);
    cudaMemcpyAsync(a, b, n * sizeof(float4), cudaMemcpyDeviceToDevice, s);
    cudaStreamSynchronize(s);
    units += 20 + 40 + 10 + 10;
    ++rounds;
  }
  double elapsed = Now() - t0;
  printf("{\"check\":\"mix\",\"rounds\":%ld,\"seconds\":%.2f,\"units_per_s\":%.1f}\n", rounds, elapsed,
         static_cast<double>(units) / elapsed);
  return 0;
}

#ifdef GPUSHARE_CUBLAS
#include <cublas_v2.h>
// cuBLAS SGEMM n x n, back to back: real kernels from a real library (its module loading, its
// workspace allocations through the interposer).
static int Gemm(double seconds, int n) {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    printf("{\"check\":\"gemm\",\"error\":\"cublasCreate\"}\n");
    return 1;
  }
  float *a, *b, *c;
  size_t bytes = static_cast<size_t>(n) * n * sizeof(float);
  cudaMalloc(&a, bytes);
  cudaMalloc(&b, bytes);
  cudaMalloc(&c, bytes);
  cudaMemset(a, 0, bytes);
  cudaMemset(b, 0, bytes);
  const float one = 1.0f, zero = 0.0f;
  cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);
  cudaDeviceSynchronize();
  double t0 = Now();
  long gemms = 0;
  while (Now() - t0 < seconds) {
    for (int i = 0; i < 10; ++i, ++gemms)
      cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);
    cudaDeviceSynchronize();
  }
  double elapsed = Now() - t0;
  double tflops = 2.0 * n * n * static_cast<double>(n) * gemms / elapsed / 1e12;
  printf("{\"check\":\"gemm\",\"n\":%d,\"gemms\":%ld,\"seconds\":%.2f,\"gemms_per_s\":%.1f,\"tflops\":%.2f}\n", n,
         gemms, elapsed, static_cast<double>(gemms) / elapsed, tflops);
  cublasDestroy(h);
  return 0;
}
#endif

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
  if (c == "fill" && argc > 4)
    return Fill(argv[2], static_cast<size_t>(atol(argv[3])), argv[4], argc > 5 ? static_cast<size_t>(atol(argv[5])) : 0);
  if (c == "mix" && argc > 2) return Mix(atof(argv[2]));
#ifdef GPUSHARE_CUBLAS
  if (c == "gemm" && argc > 3) return Gemm(atof(argv[2]), atoi(argv[3]));
#endif
  fprintf(stderr, "gpu_checks: unknown or incomplete command\n");
  return 2;
}
