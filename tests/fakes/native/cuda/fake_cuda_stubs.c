/* Every symbol the CUDA 13.0 driver stub exports (interpose/generated/libcuda_exports.inc), as
   a weak stub returning CUDA_ERROR_NOT_SUPPORTED (801). fake_cuda.cc's strong definitions
   replace the ones the fake implements. Also the name -> address table the fake's
   cuGetProcAddress hands out from. Written in C: the stubs take no parameters whatever the
   real prototype, which is harmless for functions that only return a code. */
#include <stddef.h>

int fakecuda_unimplemented(const char* name);

#define GPUSHARE_CUDA_EXPORT(name)                              \
  __attribute__((weak, visibility("default"))) int name(void) { \
    return fakecuda_unimplemented(#name);                       \
  }
#include "interpose/generated/libcuda_exports.inc"
#undef GPUSHARE_CUDA_EXPORT

struct fakecuda_export {
  const char* name;
  void* fn;
};

#define GPUSHARE_CUDA_EXPORT(name) {#name, (void*)&name},
const struct fakecuda_export fakecuda_exports[] = {
#include "interpose/generated/libcuda_exports.inc"
    {NULL, NULL}};
#undef GPUSHARE_CUDA_EXPORT
