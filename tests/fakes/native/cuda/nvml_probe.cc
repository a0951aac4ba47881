// nvml-probe: what nvidia-smi and pynvml ask NVML about memory, for tests/interpose.
//   nvml-probe <index>   prints "v1 <rc> <total> <free> <used>" and
//                        "v2 <rc> <total> <reserved> <free> <used>" from the functions the program
//                        is linked against, then "dlsym-v1 ..." through dlopen + dlsym (pynvml).
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "interpose/nvml_abi.h"

using namespace gpushare::nvml;  // NOLINT

extern "C" {
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int, nvmlDevice_t*);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t*);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t, nvmlMemory_v2_t*);
}

int main(int argc, char** argv) {
  unsigned idx = argc > 1 ? static_cast<unsigned>(atoi(argv[1])) : 0;
  nvmlReturn_t r = nvmlInit_v2();
  printf("init %d\n", r);
  nvmlDevice_t dev = nullptr;
  r = nvmlDeviceGetHandleByIndex_v2(idx, &dev);
  printf("handle %d\n", r);
  nvmlMemory_t m1{};
  r = nvmlDeviceGetMemoryInfo(dev, &m1);
  printf("v1 %d %llu %llu %llu\n", r, m1.total, m1.free, m1.used);
  nvmlMemory_v2_t m2{};
  m2.version = nvmlMemory_v2;
  r = nvmlDeviceGetMemoryInfo_v2(dev, &m2);
  printf("v2 %d %llu %llu %llu %llu\n", r, m2.total, m2.reserved, m2.free, m2.used);
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  auto fn = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*)>(
      h != nullptr ? dlsym(h, "nvmlDeviceGetMemoryInfo") : nullptr);
  nvmlMemory_t m3{};
  r = fn != nullptr ? fn(dev, &m3) : -1;
  printf("dlsym-v1 %d %llu %llu %llu\n", r, m3.total, m3.free, m3.used);
  return 0;
}
