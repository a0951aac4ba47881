/* Prints gpushare_next_target() (102 when RTLD_NEXT works: A's wrapper around B), and whether
   non-CUDA symbols come back untouched through a dlsym that an interposer replaced. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int gpushare_next_target(void);

int main(void) {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void* via_handle = dlsym(libc, "strlen");
  void* via_default = dlsym(RTLD_DEFAULT, "strlen");
  printf("next %d\n", gpushare_next_target());
  printf("strlen %d\n",
         via_handle != 0 && via_handle == via_default && via_handle == (void*)&strlen);
  printf("missing %d\n", dlsym(RTLD_DEFAULT, "cuThisDoesNotExist") == 0);
  return 0;
}
