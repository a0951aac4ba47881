/* RTLD_NEXT check, library A: wraps gpushare_next_target() and finds the wrapped definition
   (library B's) with dlsym(RTLD_NEXT). If an interposer answered RTLD_NEXT relative to itself
   instead of to A, A would find its own definition and recurse. */
#define _GNU_SOURCE
#include <dlfcn.h>

__attribute__((visibility("default"))) int gpushare_next_target(void) {
  int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "gpushare_next_target");
  if (next == 0 || next == gpushare_next_target) return -1;
  return 100 + next();
}
