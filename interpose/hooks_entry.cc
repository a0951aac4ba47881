// How the wrappers are reached: the exported symbols (programs linked with -lcuda), dlsym
// (programs and runtimes that dlopen the driver: the CUDA 12/13 runtime looks up only
// cuGetProcAddress_v2 this way), and cuGetProcAddress/_v2 (everything the runtime uses, and
// cudaGetDriverEntryPoint). Plus the NVML memory queries nvidia-smi and frameworks read.
#include <dlfcn.h>
#include <string.h>

#include "interpose/base.h"
#include "interpose/entry_points.h"
#include "interpose/log.h"
#include "interpose/runtime.h"

namespace gpushare::interpose {
namespace {

struct FnRow {
  const char* name;
  void* wrapper;
};

#define GPUSHARE_ROW(name) {#name, reinterpret_cast<void*>(&::name)},
#define GPUSHARE_ROW2(name, type) {#name, nullptr},
const FnRow kRows[kFnCount] = {GPUSHARE_CUDA_HOOKS(GPUSHARE_ROW) GPUSHARE_NVML_HOOKS(
    GPUSHARE_ROW) GPUSHARE_CUDA_INTERNAL(GPUSHARE_ROW2) GPUSHARE_NVML_INTERNAL(GPUSHARE_ROW2)};
#undef GPUSHARE_ROW
#undef GPUSHARE_ROW2

// Hook ids sorted by name, for binary search (built once, on first use).
constinit int g_sorted[kHookCount] = {};
constinit int g_sorted_state = 0;

void BuildSorted() {
  int state = LoadAcquire(&g_sorted_state);
  if (state == 2) return;
  int expected = 0;
  if (!CasStrong(&g_sorted_state, &expected, 1)) {
    while (LoadAcquire(&g_sorted_state) != 2) {
    }
    return;
  }
  for (int i = 0; i < kHookCount; ++i) g_sorted[i] = i;
  for (int i = 1; i < kHookCount; ++i) {  // insertion sort: ~75 names, once
    int v = g_sorted[i];
    int j = i - 1;
    while (j >= 0 && strcmp(kRows[g_sorted[j]].name, kRows[v].name) > 0) {
      g_sorted[j + 1] = g_sorted[j];
      --j;
    }
    g_sorted[j + 1] = v;
  }
  StoreRelease(&g_sorted_state, 2);
}

// Is `p` a function of the library whose base address is `base`?
bool InLibrary(const void* p, uintptr_t base) {
  if (base == 0) return false;
  Dl_info info;
  return dladdr(p, &info) != 0 && reinterpret_cast<uintptr_t>(info.dli_fbase) == base;
}

// A cuGetProcAddress answer: our wrapper when the request selects a hooked ABI.
void SubstituteProc(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  if (symbol == nullptr || pfn == nullptr || *pfn == nullptr || !Active()) return;
  bool too_low = false;
  const char* exported = ResolveEntryPoint(symbol, version, flags, &too_low);
  if (exported == nullptr) return;
  int id = HookByName(exported);
  if (id < 0 || IsNvmlFn(id)) return;
  if (*pfn == kRows[id].wrapper) return;
  RememberReal(id, *pfn);
  *pfn = kRows[id].wrapper;
}

}  // namespace

const char* FnName(int id) {
  return id >= 0 && id < kFnCount ? kRows[id].name : nullptr;
}
void* HookWrapper(int id) {
  return id >= 0 && id < kHookCount ? kRows[id].wrapper : nullptr;
}
bool IsNvmlFn(int id) {
  return (id > kNvmlHookBase && id < kHookCount) || (id > kNvmlInternalBase && id < kFnCount);
}

int HookByName(const char* name) {
  if (name == nullptr) return -1;
  BuildSorted();
  int lo = 0, hi = kHookCount;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    int c = strcmp(kRows[g_sorted[mid]].name, name);
    if (c == 0) return g_sorted[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

}  // namespace gpushare::interpose

using namespace gpushare::interpose;  // NOLINT

// ---- dlsym ------------------------------------------------------------------------------------
// dlsym(RTLD_NEXT, name) must be answered relative to its caller, and glibc's dlsym finds the
// caller from its return address. So `dlsym` is a tiny trampoline: for RTLD_NEXT it jumps
// straight into glibc's dlsym with the caller's return address still on the stack; for any
// other handle it jumps to gpushare_dlsym_hook, which calls glibc's dlsym with the caller's own
// handle (HAMi-core PR #326) and then substitutes a wrapper where one applies.

extern "C" {
__attribute__((visibility("hidden"))) extern void* gpushare_real_dlsym_ptr;
__attribute__((visibility("hidden"))) void* gpushare_resolve_real_dlsym(void);

__attribute__((visibility("hidden"), used)) void* gpushare_dlsym_hook(void* handle,
                                                                      const char* symbol) {
  void* caller = __builtin_return_address(0);
  DlsymFn real = RealDlsym();
  if (real == nullptr) return nullptr;
  void* p = real(handle, symbol);
  if (p == nullptr || symbol == nullptr) return p;
  bool cuda = symbol[0] == 'c' && symbol[1] == 'u';
  bool nvml = symbol[0] == 'n' && StartsWith(symbol, "nvmlDeviceGetMemoryInfo");
  if (!cuda && !nvml) return p;
  if (!Active()) return p;
  int id = HookByName(symbol);
  if (id < 0) return p;
  void* wrapper = HookWrapper(id);
  if (p == wrapper) return p;
  // Only the driver's (or NVML's) own function is replaced, and never for the driver itself
  // looking up its own symbols.
  uintptr_t base = nvml ? NvmlBase() : DriverBase();
  if (!InLibrary(p, base) || InLibrary(caller, base)) return p;
  RememberReal(id, p);
  return wrapper;
}
}

#if defined(__x86_64__)
__asm__(
    ".text\n"
    ".globl dlsym\n"
    ".type dlsym,@function\n"
    ".p2align 4\n"
    "dlsym:\n"
    "  cmpq $-1, %rdi\n"  // RTLD_NEXT
    "  je 1f\n"
    "  jmp gpushare_dlsym_hook\n"
    "1:\n"
    "  movq gpushare_real_dlsym_ptr(%rip), %rax\n"
    "  testq %rax, %rax\n"
    "  jz 2f\n"
    "  jmp *%rax\n"
    "2:\n"
    "  pushq %rdi\n"
    "  pushq %rsi\n"
    "  subq $8, %rsp\n"
    "  call gpushare_resolve_real_dlsym\n"
    "  addq $8, %rsp\n"
    "  popq %rsi\n"
    "  popq %rdi\n"
    "  testq %rax, %rax\n"
    "  jz 3f\n"
    "  jmp *%rax\n"
    "3:\n"
    "  ret\n"
    ".size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
__asm__(
    ".text\n"
    ".globl dlsym\n"
    ".type dlsym,%function\n"
    ".p2align 4\n"
    "dlsym:\n"
    "  cmn x0, #1\n"
    "  b.eq 1f\n"
    "  b gpushare_dlsym_hook\n"
    "1:\n"
    "  adrp x16, gpushare_real_dlsym_ptr\n"
    "  ldr x16, [x16, :lo12:gpushare_real_dlsym_ptr]\n"
    "  cbz x16, 2f\n"
    "  br x16\n"
    "2:\n"
    "  stp x29, x30, [sp, #-32]!\n"
    "  stp x0, x1, [sp, #16]\n"
    "  bl gpushare_resolve_real_dlsym\n"
    "  mov x16, x0\n"
    "  ldp x0, x1, [sp, #16]\n"
    "  ldp x29, x30, [sp], #32\n"
    "  cbz x16, 3f\n"
    "  br x16\n"
    "3:\n"
    "  mov x0, #0\n"
    "  ret\n"
    ".size dlsym, .-dlsym\n");
#else
#error "dlsym trampoline: only x86_64 and aarch64 are supported"
#endif

// ---- cuGetProcAddress
// ----------------------------------------------------------------------------

extern "C" __attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(
    const char* symbol, void** pfn, int version, cuuint64_t flags,
    CUdriverProcAddressQueryResult* status) {
  auto real = GPUSHARE_REAL(cuGetProcAddress_v2);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS) SubstituteProc(symbol, pfn, version, flags);
  return r;
}

extern "C" __attribute__((visibility("default"))) CUresult cuGetProcAddress(const char* symbol,
                                                                            void** pfn, int version,
                                                                            cuuint64_t flags) {
  auto real = GPUSHARE_REAL(cuGetProcAddress);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS) SubstituteProc(symbol, pfn, version, flags);
  return r;
}

// ---- NVML
// ----------------------------------------------------------------------------------------

namespace {

// The limit and container usage for an NVML device, when it is limited.
bool NvmlLimit(nvmlDevice_t device, uint64_t* limit, uint64_t* used) {
  auto get_uuid = Real<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int)>(kFn_nvmlDeviceGetUUID);
  auto get_index = Real<nvmlReturn_t (*)(nvmlDevice_t, unsigned int*)>(kFn_nvmlDeviceGetIndex);
  char text[gpushare::nvml::NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  uint8_t uuid[16] = {};
  bool have_uuid = get_uuid != nullptr &&
                   get_uuid(device, text, sizeof(text)) == gpushare::nvml::NVML_SUCCESS &&
                   ParseUuid(text, StrLen(text), uuid);
  unsigned int index = 0;
  bool have_index =
      get_index != nullptr && get_index(device, &index) == gpushare::nvml::NVML_SUCCESS;
  const Config& config = GetConfig();
  if (config.fail_closed) {
    *limit = 0;
    *used = 0;
    return true;
  }
  Region& region = TheRegion();
  DeviceLimits lim =
      LimitsFor(config, have_index ? static_cast<int>(index) : -1, have_uuid ? uuid : nullptr);
  // The container's usage lives in the region, which an NVML-only process (nvidia-smi) attaches
  // without taking a slot. A device some CUDA process registered carries the enforced limit.
  int dev = (have_uuid && AttachRegionForQueries()) ? region.FindDevice(uuid) : -1;
  if (dev >= 0) {
    RegionDevice& rd = region.file()->devices[dev];
    if (rd.limited == 0) return false;
    *limit = rd.memory_limit;
    *used = region.Used(dev);
    return true;
  }
  if (!lim.memory_limited) return false;
  *limit = lim.memory_limit;
  *used = 0;
  return true;
}

// Both memory-info ABIs: total = min(limit, physical), free = min(total - usage, physical free),
// used = total - free (NVML's total = free + used); v2's `reserved` is 0 inside the limit.
template <typename Mem>
nvmlReturn_t ClampMemory(nvmlReturn_t r, nvmlDevice_t device, Mem* memory) {
  uint64_t limit = 0, used = 0;
  if (r != gpushare::nvml::NVML_SUCCESS || memory == nullptr || !Active() ||
      !NvmlLimit(device, &limit, &used))
    return r;
  uint64_t total = Min(limit, memory->total);
  uint64_t free_bytes = Min(SatSub(total, used), memory->free);
  memory->total = total;
  memory->free = free_bytes;
  memory->used = total - free_bytes;
  if constexpr (requires { memory->reserved; }) memory->reserved = 0;
  return r;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo(
    nvmlDevice_t device, nvmlMemory_t* memory) {
  auto real = GPUSHARE_REAL(nvmlDeviceGetMemoryInfo);
  if (real == nullptr) return gpushare::nvml::NVML_ERROR_UNINITIALIZED;
  return ClampMemory(real(device, memory), device, memory);
}

extern "C" __attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(
    nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  auto real = GPUSHARE_REAL(nvmlDeviceGetMemoryInfo_v2);
  if (real == nullptr) return gpushare::nvml::NVML_ERROR_UNINITIALIZED;
  return ClampMemory(real(device, memory), device, memory);
}
