// glibc_compat.h: binds libgpushare-cuda.so's libc references to symbol versions every glibc
// since 2.17 provides, so the library built here (glibc 2.36) loads into old images.
//
// glibc 2.34 moved libdl and libpthread into libc and gave those functions new default versions
// (GLIBC_2.34). Linking against them would make the library unloadable on older glibc, so the
// old versions are requested explicitly; the library also lists libdl.so.2 and libpthread.so.0
// as dependencies, where those versions live on glibc < 2.34. Force-included into every
// translation unit of the library (see interpose/CMakeLists.txt);
// tests/interpose/symbol_versions_test.cc checks the built file.
#pragma once

#if defined(__x86_64__)
#define GPUSHARE_GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define GPUSHARE_GLIBC_BASE "GLIBC_2.17"
#endif

#if defined(GPUSHARE_GLIBC_BASE)
#define GPUSHARE_SYMVER(sym, ver) __asm__(".symver " #sym "," #sym "@" ver)
GPUSHARE_SYMVER(dlopen, GPUSHARE_GLIBC_BASE);
GPUSHARE_SYMVER(dlclose, GPUSHARE_GLIBC_BASE);
GPUSHARE_SYMVER(dlerror, GPUSHARE_GLIBC_BASE);
GPUSHARE_SYMVER(dladdr, GPUSHARE_GLIBC_BASE);
GPUSHARE_SYMVER(dlvsym, GPUSHARE_GLIBC_BASE);
GPUSHARE_SYMVER(pthread_mutexattr_init, GPUSHARE_GLIBC_BASE);
GPUSHARE_SYMVER(pthread_mutexattr_destroy, GPUSHARE_GLIBC_BASE);
GPUSHARE_SYMVER(pthread_mutexattr_setpshared, GPUSHARE_GLIBC_BASE);
GPUSHARE_SYMVER(pthread_mutex_trylock, GPUSHARE_GLIBC_BASE);
#if defined(__x86_64__)
GPUSHARE_SYMVER(pthread_mutexattr_setrobust, "GLIBC_2.12");
GPUSHARE_SYMVER(pthread_mutex_consistent, "GLIBC_2.12");
#else
GPUSHARE_SYMVER(pthread_mutexattr_setrobust, GPUSHARE_GLIBC_BASE);
GPUSHARE_SYMVER(pthread_mutex_consistent, GPUSHARE_GLIBC_BASE);
#endif
#undef GPUSHARE_SYMVER
#endif
