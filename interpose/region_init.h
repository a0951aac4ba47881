// region_init.h: how a new accounting region file (interpose/region_layout.h) is initialised:
// zeroed, a robust process-shared mutex, the four identifying fields, `ready` stored last
// (release). libgpushare-cuda.so's Region::Attach runs it on a file it created; tests and
// benchmarks of the region's readers run it to write files exactly as the library does.
// Self-contained like region_layout.h (C headers and pthread.h only), so that including it
// takes none of the library's code.
#pragma once

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "interpose/region_layout.h"

namespace gpushare::interpose {

inline void InitialiseRegionFile(RegionFile* f) {
  memset(f, 0, sizeof(*f));
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&f->header.mutex, &attr);
  pthread_mutexattr_destroy(&attr);
  f->header.magic = kRegionMagic;
  f->header.layout_version = kRegionLayoutVersion;
  f->header.header_size = sizeof(RegionHeader);
  f->header.file_size = sizeof(RegionFile);
  __atomic_store_n(&f->header.ready, uint32_t{1}, __ATOMIC_RELEASE);
}

}  // namespace gpushare::interpose
