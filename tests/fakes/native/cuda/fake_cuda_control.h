// fake_cuda_control.h: the test-only API of the fake CUDA driver (build/fakes/cuda/libcuda.so.1).
//
// The fake keeps the ground truth an interposer test compares against: the "physical" memory
// the fake GPU holds (per process, and across every process sharing FAKE_CUDA_CONFIG's
// state_file, which plays the role of one GPU shared by several containers), its high-water
// mark, how many calls reached each exported implementation (so a test can tell which ABI
// variant a pointer led to), and fault injection. Tests resolve these with dlsym; their names
// start with "fakecuda_", which the interposer never touches.
//
// Configuration: FAKE_CUDA_CONFIG=<file> with key=value lines (all optional):
//   devices=1                  number of devices (max 16)
//   device.<i>.uuid=GPU-...    default GPU-fa4e0000-0000-0000-0000-0000000000<i>
//   device.<i>.total_mib=81920 device memory
//   sm_count=132               CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
//   driver_version=13000       cuDriverGetVersion; cuGetProcAddress refuses newer requests
//   context_overhead_mib=0     device memory each context takes
//   granularity_kib=2048       VMM granularity and the large-page size linear allocations round to
//   pitch_align=512            cuMemAllocPitch pitch alignment
//   pool_chunk_kib=2048        stream-ordered pools grow by this much
//   array_pad_kib=0            extra memory every array takes beyond its block-linear tiling
//   kernel_ns=10000            simulated duration of a launch (a function named "spin_<ns>"
//                              from cuModuleGetFunction runs that long instead)
//   state_file=<path>          share physical usage with other processes (one simulated GPU)
//   ctx_device_fails_off_main_thread=0   cuCtxGetDevice returns 201 off the main thread
#pragma once

#include <stdint.h>

extern "C" {
using fakecuda_u64_fn = uint64_t (*)(int dev);
using fakecuda_calls_fn = uint64_t (*)(const char* exported_name);
using fakecuda_void_fn = void (*)(void);
using fakecuda_count_fn = uint64_t (*)(void);
using fakecuda_fail_fn = void (*)(const char* exported_name, int count, int result);

uint64_t fakecuda_physical_used(int dev);  // every live process sharing the state
uint64_t fakecuda_process_used(int dev);   // this process
uint64_t fakecuda_high_water(int dev);     // max of physical_used since the last reset
void fakecuda_reset_high_water(void);
uint64_t fakecuda_calls(const char* exported_name);
uint64_t fakecuda_live_objects(void);  // this process's live allocations, arrays, handles
void fakecuda_fail_next(const char* exported_name, int count, int result);
uint64_t fakecuda_busy_ns(int dev);  // simulated kernel time so far (this process)
}
