/* fake_nvml.c: a fake libnvidia-ml.so.1 for machines without NVIDIA GPUs.
 *
 * Data-driven: the node it pretends to be is read from the file named by FAKE_NVML_CONFIG
 * when nvmlInit_v2 takes the reference count from 0 to 1 (format: README.md next to this
 * file). It follows NVML's behaviour where gpushare depends on it, including the unpleasant
 * parts: reference-counted init/shutdown, NVML_ERROR_UNINITIALIZED before init and after the
 * last shutdown, NVML_ERROR_INSUFFICIENT_SIZE for short buffers, the v1 and versioned v2 memory
 * structs (NVML_ERROR_ARGUMENT_VERSION_MISMATCH for a wrong version), NOT_FOUND for empty MIG
 * slots, events of MIG devices reported on the parent GPU with GI/CI IDs, and
 * NVML_ERROR_TIMEOUT from nvmlEventSetWait_v2 when nothing happened. XID events are injected
 * by appending lines to the events file the config names; the fake polls it.
 *
 * Plain C (no C++ runtime to carry), linked -Bsymbolic with SONAME libnvidia-ml.so.1.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/nvml_api.h"

#define EXPORT __attribute__((visibility("default")))

#define MAX_GPUS 64
#define MAX_MIG 8
#define MAX_FAILS 32
#define MAX_SETS 16
#define MAX_PENDING 64

struct nvmlDevice_st {
  int is_mig;
  int gpu;  /* index of the GPU (the parent for a MIG device) */
  int slot; /* MIG slot, -1 for a GPU */
};

typedef struct {
  int present;
  char uuid[96];
  char name[96];
  unsigned gi, ci;
  unsigned long long memory_mib, used_mib;
  unsigned slices, ci_slices, sms;
  struct nvmlDevice_st handle;
} FakeMig;

typedef struct {
  char uuid[96];
  char name[96];
  unsigned long long memory_mib, used_mib, reserved_mib;
  int cc_major, cc_minor;
  char pci[32];
  unsigned sms;
  int mig_capable, mig_enabled, mig_pending;
  unsigned max_mig;
  int events;      /* supports XID events */
  int cuda_device; /* >= 0: used memory follows the fake CUDA driver's device of this index */
  FakeMig mig[MAX_MIG];
  struct nvmlDevice_st handle;
} FakeGpu;

typedef struct {
  char fn[64];
  int code;
} FakeFail;

struct nvmlEventSet_st {
  int in_use;
  unsigned long long mask[MAX_GPUS];
  long offset; /* how far the events file has been read for this set */
  nvmlEventData_t pending[MAX_PENDING];
  int npending;
  int lost_pending;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_refcount = 0;
static char g_driver[80] = "570.124.06";
static int g_cuda = 12080;
static FakeGpu g_gpus[MAX_GPUS];
static unsigned g_ngpus = 0;
static char g_events_path[4096] = "";
static FakeFail g_fails[MAX_FAILS];
static int g_nfails = 0;
static struct nvmlEventSet_st g_sets[MAX_SETS];

/* ------------------------------------------------------------------------------------------ */
/* Config parsing                                                                             */

/* Reads the next "key=value" (value may be "quoted") from *p. Returns 0 at end of line. */
static int next_kv(char** p, char* key, size_t klen, char* val, size_t vlen) {
  char* s = *p;
  while (*s == ' ' || *s == '\t') ++s;
  if (*s == '\0' || *s == '\n' || *s == '#') return 0;
  size_t k = 0;
  while (*s && *s != '=' && *s != ' ' && *s != '\t' && *s != '\n') {
    if (k + 1 < klen) key[k++] = *s;
    ++s;
  }
  key[k] = '\0';
  size_t v = 0;
  if (*s == '=') {
    ++s;
    if (*s == '"') {
      ++s;
      while (*s && *s != '"') {
        if (v + 1 < vlen) val[v++] = *s;
        ++s;
      }
      if (*s == '"') ++s;
    } else {
      while (*s && *s != ' ' && *s != '\t' && *s != '\n') {
        if (v + 1 < vlen) val[v++] = *s;
        ++s;
      }
    }
  }
  val[v] = '\0';
  *p = s;
  return 1;
}

/* Copies with truncation; dst is always terminated. */
static void copy(char* dst, size_t n, const char* src) {
  size_t i = 0;
  for (; i + 1 < n && src[i] != '\0'; ++i) dst[i] = src[i];
  if (n > 0) dst[i] = '\0';
}

static void warn(const char* path, int line, const char* what, const char* detail) {
  fprintf(stderr, "fake-nvml: %s:%d: %s%s%s\n", path, line, what, detail ? ": " : "",
          detail ? detail : "");
}

/* Returns 0 on success. */
static int load_config(const char* path) {
  FILE* f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "fake-nvml: cannot read FAKE_NVML_CONFIG %s: %s\n", path, strerror(errno));
    return -1;
  }
  memset(g_gpus, 0, sizeof(g_gpus));
  g_ngpus = 0;
  g_nfails = 0;
  g_events_path[0] = '\0';
  copy(g_driver, sizeof(g_driver), "570.124.06");
  g_cuda = 12080;
  char line[1024];
  int ln = 0, bad = 0;
  while (fgets(line, sizeof(line), f)) {
    ++ln;
    char* p = line;
    while (*p == ' ' || *p == '\t') ++p;
    if (*p == '#' || *p == '\n' || *p == '\0') continue;
    char word[32];
    size_t w = 0;
    while (*p && !isspace((unsigned char)*p)) {
      if (w + 1 < sizeof(word)) word[w++] = *p;
      ++p;
    }
    word[w] = '\0';
    char key[64], val[512];
    if (strcmp(word, "driver") == 0) {
      while (*p == ' ') ++p;
      copy(g_driver, sizeof(g_driver), p);
      g_driver[strcspn(g_driver, "\r\n")] = '\0';
    } else if (strcmp(word, "cuda") == 0) {
      g_cuda = atoi(p);
    } else if (strcmp(word, "events") == 0) {
      while (*p == ' ') ++p;
      copy(g_events_path, sizeof(g_events_path), p);
      g_events_path[strcspn(g_events_path, "\r\n")] = '\0';
    } else if (strcmp(word, "fail") == 0) {
      char fn[64] = "";
      int code = 0;
      if (sscanf(p, "%63s %d", fn, &code) != 2 || g_nfails >= MAX_FAILS) {
        warn(path, ln, "bad fail line", NULL);
        bad = 1;
        continue;
      }
      copy(g_fails[g_nfails].fn, sizeof(g_fails[0].fn), fn);
      g_fails[g_nfails++].code = code;
    } else if (strcmp(word, "gpu") == 0) {
      if (g_ngpus >= MAX_GPUS) {
        warn(path, ln, "too many GPUs", NULL);
        bad = 1;
        continue;
      }
      FakeGpu* g = &g_gpus[g_ngpus];
      memset(g, 0, sizeof(*g));
      copy(g->name, sizeof(g->name), "NVIDIA A10");
      g->memory_mib = 23028;
      g->cc_major = 8;
      g->cc_minor = 6;
      g->max_mig = 7;
      g->events = 1;
      g->cuda_device = -1;
      g->mig_capable = -1;
      snprintf(g->pci, sizeof(g->pci), "00000000:%02X:00.0", 0x17 + (int)g_ngpus);
      while (next_kv(&p, key, sizeof(key), val, sizeof(val))) {
        if (strcmp(key, "uuid") == 0)
          copy(g->uuid, sizeof(g->uuid), val);
        else if (strcmp(key, "name") == 0)
          copy(g->name, sizeof(g->name), val);
        else if (strcmp(key, "memory_mib") == 0)
          g->memory_mib = strtoull(val, NULL, 10);
        else if (strcmp(key, "used_mib") == 0)
          g->used_mib = strtoull(val, NULL, 10);
        else if (strcmp(key, "reserved_mib") == 0)
          g->reserved_mib = strtoull(val, NULL, 10);
        else if (strcmp(key, "cuda_device") == 0)
          g->cuda_device = atoi(val);
        else if (strcmp(key, "cc") == 0)
          sscanf(val, "%d.%d", &g->cc_major, &g->cc_minor);
        else if (strcmp(key, "pci") == 0)
          copy(g->pci, sizeof(g->pci), val);
        else if (strcmp(key, "sms") == 0)
          g->sms = (unsigned)atoi(val);
        else if (strcmp(key, "mig") == 0)
          g->mig_enabled = atoi(val);
        else if (strcmp(key, "mig_pending") == 0)
          g->mig_pending = atoi(val);
        else if (strcmp(key, "mig_capable") == 0)
          g->mig_capable = atoi(val);
        else if (strcmp(key, "max_mig") == 0)
          g->max_mig = (unsigned)atoi(val);
        else if (strcmp(key, "events") == 0)
          g->events = atoi(val);
        else {
          warn(path, ln, "unknown gpu key", key);
          bad = 1;
        }
      }
      if (g->mig_capable < 0) g->mig_capable = g->mig_enabled;
      if (!g->mig_enabled && g->mig_pending == 0) g->mig_pending = g->mig_enabled;
      if (g->max_mig > MAX_MIG) g->max_mig = MAX_MIG;
      if (g->uuid[0] == '\0') {
        warn(path, ln, "gpu needs uuid=", NULL);
        bad = 1;
      }
      g->handle.is_mig = 0;
      g->handle.gpu = (int)g_ngpus;
      g->handle.slot = -1;
      ++g_ngpus;
    } else if (strcmp(word, "mig") == 0) {
      FakeMig m;
      memset(&m, 0, sizeof(m));
      int gpu = -1, slot = -1;
      m.slices = 1;
      m.ci_slices = 0;
      while (next_kv(&p, key, sizeof(key), val, sizeof(val))) {
        if (strcmp(key, "gpu") == 0)
          gpu = atoi(val);
        else if (strcmp(key, "slot") == 0)
          slot = atoi(val);
        else if (strcmp(key, "uuid") == 0)
          copy(m.uuid, sizeof(m.uuid), val);
        else if (strcmp(key, "name") == 0)
          copy(m.name, sizeof(m.name), val);
        else if (strcmp(key, "gi") == 0)
          m.gi = (unsigned)atoi(val);
        else if (strcmp(key, "ci") == 0)
          m.ci = (unsigned)atoi(val);
        else if (strcmp(key, "memory_mib") == 0)
          m.memory_mib = strtoull(val, NULL, 10);
        else if (strcmp(key, "used_mib") == 0)
          m.used_mib = strtoull(val, NULL, 10);
        else if (strcmp(key, "slices") == 0)
          m.slices = (unsigned)atoi(val);
        else if (strcmp(key, "ci_slices") == 0)
          m.ci_slices = (unsigned)atoi(val);
        else if (strcmp(key, "sms") == 0)
          m.sms = (unsigned)atoi(val);
        else {
          warn(path, ln, "unknown mig key", key);
          bad = 1;
        }
      }
      if (gpu < 0 || (unsigned)gpu >= g_ngpus) {
        warn(path, ln, "mig needs gpu=<index of an earlier gpu line>", NULL);
        bad = 1;
        continue;
      }
      FakeGpu* g = &g_gpus[gpu];
      if (slot < 0) {
        for (slot = 0; slot < MAX_MIG && g->mig[slot].present; ++slot) {
        }
      }
      if (slot < 0 || slot >= MAX_MIG || (unsigned)slot >= g->max_mig) {
        warn(path, ln, "no free MIG slot", NULL);
        bad = 1;
        continue;
      }
      if (m.ci_slices == 0) m.ci_slices = m.slices;
      m.present = 1;
      m.handle.is_mig = 1;
      m.handle.gpu = gpu;
      m.handle.slot = slot;
      g->mig[slot] = m;
    } else {
      warn(path, ln, "unknown line", word);
      bad = 1;
    }
  }
  fclose(f);
  return bad ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */

static nvmlReturn_t injected(const char* fn) {
  for (int i = 0; i < g_nfails; ++i) {
    if (strcmp(g_fails[i].fn, fn) == 0) return g_fails[i].code;
  }
  return NVML_SUCCESS;
}

/* Common entry checks: initialised, injected failure. Returns with the lock held on success. */
#define ENTER(fn)                     \
  pthread_mutex_lock(&g_mu);          \
  if (g_refcount == 0) {              \
    pthread_mutex_unlock(&g_mu);      \
    return NVML_ERROR_UNINITIALIZED;  \
  }                                   \
  do {                                \
    nvmlReturn_t inj_ = injected(fn); \
    if (inj_ != NVML_SUCCESS) {       \
      pthread_mutex_unlock(&g_mu);    \
      return inj_;                    \
    }                                 \
  } while (0)

#define LEAVE(code)              \
  do {                           \
    pthread_mutex_unlock(&g_mu); \
    return (code);               \
  } while (0)

static FakeGpu* gpu_of(nvmlDevice_t d) {
  if (d == NULL) return NULL;
  for (unsigned i = 0; i < g_ngpus; ++i) {
    if (d == &g_gpus[i].handle) return &g_gpus[i];
    for (int j = 0; j < MAX_MIG; ++j) {
      if (d == &g_gpus[i].mig[j].handle && g_gpus[i].mig[j].present) return &g_gpus[i];
    }
  }
  return NULL;
}

static FakeMig* mig_of(nvmlDevice_t d) {
  FakeGpu* g = gpu_of(d);
  if (g == NULL || !d->is_mig) return NULL;
  return &g->mig[d->slot];
}

static nvmlReturn_t put_string(char* buf, unsigned len, const char* s) {
  if (buf == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(s) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(buf, s, strlen(s) + 1);
  return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------------------------ */
/* Init and system                                                                            */

EXPORT nvmlReturn_t nvmlInit_v2(void) {
  pthread_mutex_lock(&g_mu);
  if (g_refcount == 0) {
    const char* path = getenv("FAKE_NVML_CONFIG");
    if (path == NULL || *path == '\0') {
      fprintf(stderr, "fake-nvml: FAKE_NVML_CONFIG is not set\n");
      pthread_mutex_unlock(&g_mu);
      return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    if (load_config(path) != 0) {
      pthread_mutex_unlock(&g_mu);
      return NVML_ERROR_UNKNOWN;
    }
    nvmlReturn_t inj = injected("nvmlInit_v2");
    if (inj != NVML_SUCCESS) {
      pthread_mutex_unlock(&g_mu);
      return inj;
    }
    memset(g_sets, 0, sizeof(g_sets));
  }
  ++g_refcount;
  pthread_mutex_unlock(&g_mu);
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit(void) {
  return nvmlInit_v2();
}

EXPORT nvmlReturn_t nvmlShutdown(void) {
  pthread_mutex_lock(&g_mu);
  if (g_refcount == 0) LEAVE(NVML_ERROR_UNINITIALIZED);
  --g_refcount;
  LEAVE(NVML_SUCCESS);
}

EXPORT const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
      return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "Argument version mismatch";
    case NVML_ERROR_MEMORY:
      return "Insufficient Memory";
    default:
      return "Unknown Error";
  }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  ENTER("nvmlSystemGetDriverVersion");
  LEAVE(put_string(version, length, g_driver));
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  ENTER("nvmlSystemGetCudaDriverVersion_v2");
  if (version == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  *version = g_cuda;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) {
  return nvmlSystemGetCudaDriverVersion_v2(version);
}

/* ------------------------------------------------------------------------------------------ */
/* Devices                                                                                    */

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  ENTER("nvmlDeviceGetCount_v2");
  if (count == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  *count = g_ngpus;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  return nvmlDeviceGetCount_v2(count);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  ENTER("nvmlDeviceGetHandleByIndex_v2");
  if (device == NULL || index >= g_ngpus) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  *device = &g_gpus[index].handle;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  ENTER("nvmlDeviceGetHandleByUUID");
  if (uuid == NULL || device == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  for (unsigned i = 0; i < g_ngpus; ++i) {
    if (strcmp(g_gpus[i].uuid, uuid) == 0) {
      *device = &g_gpus[i].handle;
      LEAVE(NVML_SUCCESS);
    }
    for (int j = 0; j < MAX_MIG; ++j) {
      if (g_gpus[i].mig[j].present && strcmp(g_gpus[i].mig[j].uuid, uuid) == 0) {
        *device = &g_gpus[i].mig[j].handle;
        LEAVE(NVML_SUCCESS);
      }
    }
  }
  LEAVE(NVML_ERROR_NOT_FOUND);
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  ENTER("nvmlDeviceGetIndex");
  FakeGpu* g = gpu_of(device);
  if (g == NULL || index == NULL || device->is_mig) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  *index = (unsigned)device->gpu;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  ENTER("nvmlDeviceGetUUID");
  FakeGpu* g = gpu_of(device);
  if (g == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  FakeMig* m = mig_of(device);
  LEAVE(put_string(uuid, length, m ? m->uuid : g->uuid));
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  ENTER("nvmlDeviceGetName");
  FakeGpu* g = gpu_of(device);
  if (g == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  FakeMig* m = mig_of(device);
  if (m != NULL && m->name[0] == '\0') {
    char derived[192];
    char ci[16] = "";
    if (m->ci_slices != m->slices) snprintf(ci, sizeof(ci), "%uc.", m->ci_slices);
    snprintf(derived, sizeof(derived), "%s MIG %s%ug.%llugb", g->name, ci, m->slices,
             (m->memory_mib + 1023) / 1024);
    LEAVE(put_string(name, length, derived));
  }
  LEAVE(put_string(name, length, m ? m->name : g->name));
}

/* What the fake CUDA driver loaded in this process holds on a device, across every process
 * sharing its state file (the real NVML sees every process's memory): 0 when the fake driver is
 * not loaded or the GPU does not follow one. */
static unsigned long long fake_cuda_used(int cuda_device) {
  if (cuda_device < 0) return 0;
  typedef unsigned long long (*used_fn)(int);
  used_fn f = (used_fn)dlsym(RTLD_DEFAULT, "fakecuda_physical_used");
  return f != NULL ? f(cuda_device) : 0;
}

static void memory_of(nvmlDevice_t device, unsigned long long* total, unsigned long long* used,
                      unsigned long long* reserved) {
  FakeGpu* g = gpu_of(device);
  FakeMig* m = mig_of(device);
  const unsigned long long mib = 1024ULL * 1024ULL;
  if (m != NULL) {
    *total = m->memory_mib * mib;
    *used = m->used_mib * mib;
    *reserved = 0;
  } else {
    *total = g->memory_mib * mib;
    *used = g->used_mib * mib + fake_cuda_used(g->cuda_device);
    *reserved = g->reserved_mib * mib;
  }
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  ENTER("nvmlDeviceGetMemoryInfo");
  if (gpu_of(device) == NULL || memory == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  unsigned long long total, used, reserved;
  memory_of(device, &total, &used, &reserved);
  /* v1 counts the driver's reservation as used. */
  memory->total = total;
  memory->used = used + reserved;
  memory->free = total > used + reserved ? total - used - reserved : 0;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  ENTER("nvmlDeviceGetMemoryInfo_v2");
  if (gpu_of(device) == NULL || memory == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  if (memory->version != nvmlMemory_v2) LEAVE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  unsigned long long total, used, reserved;
  memory_of(device, &total, &used, &reserved);
  memory->total = total;
  memory->reserved = reserved;
  memory->used = used;
  memory->free = total > used + reserved ? total - used - reserved : 0;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major,
                                                       int* minor) {
  ENTER("nvmlDeviceGetCudaComputeCapability");
  FakeGpu* g = gpu_of(device);
  if (g == NULL || major == NULL || minor == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  *major = g->cc_major;
  *minor = g->cc_minor;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  ENTER("nvmlDeviceGetPciInfo_v3");
  FakeGpu* g = gpu_of(device);
  if (g == NULL || pci == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  memset(pci, 0, sizeof(*pci));
  copy(pci->busId, sizeof(pci->busId), g->pci);
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  sscanf(g->pci, "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
  pci->domain = domain;
  pci->bus = bus;
  pci->device = dev;
  snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.%X", domain & 0xffff, bus,
           dev, fn);
  pci->pciDeviceId = 0x223610DE;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                         unsigned int* pending) {
  ENTER("nvmlDeviceGetMigMode");
  FakeGpu* g = gpu_of(device);
  if (g == NULL || current == NULL || pending == NULL || device->is_mig) {
    LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  }
  if (!g->mig_capable) LEAVE(NVML_ERROR_NOT_SUPPORTED);
  *current = g->mig_enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  *pending = g->mig_pending ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  ENTER("nvmlDeviceGetMaxMigDeviceCount");
  FakeGpu* g = gpu_of(device);
  if (g == NULL || count == NULL || device->is_mig) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  if (!g->mig_capable) LEAVE(NVML_ERROR_NOT_SUPPORTED);
  *count = g->max_mig;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                        nvmlDevice_t* mig) {
  ENTER("nvmlDeviceGetMigDeviceHandleByIndex");
  FakeGpu* g = gpu_of(device);
  if (g == NULL || mig == NULL || device->is_mig) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  if (!g->mig_enabled || index >= g->max_mig) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  if (!g->mig[index].present) LEAVE(NVML_ERROR_NOT_FOUND);
  *mig = &g->mig[index].handle;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig,
                                                                 nvmlDevice_t* device) {
  ENTER("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
  FakeGpu* g = gpu_of(mig);
  if (g == NULL || device == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  if (!mig->is_mig) LEAVE(NVML_ERROR_NOT_SUPPORTED);
  *device = &g->handle;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* is_mig) {
  ENTER("nvmlDeviceIsMigDeviceHandle");
  if (gpu_of(device) == NULL || is_mig == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  *is_mig = (unsigned)device->is_mig;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  ENTER("nvmlDeviceGetGpuInstanceId");
  FakeMig* m = mig_of(device);
  if (gpu_of(device) == NULL || id == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  if (m == NULL) LEAVE(NVML_ERROR_NOT_SUPPORTED);
  *id = m->gi;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  ENTER("nvmlDeviceGetComputeInstanceId");
  FakeMig* m = mig_of(device);
  if (gpu_of(device) == NULL || id == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  if (m == NULL) LEAVE(NVML_ERROR_NOT_SUPPORTED);
  *id = m->ci;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t* a) {
  ENTER("nvmlDeviceGetAttributes_v2");
  FakeGpu* g = gpu_of(device);
  if (g == NULL || a == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  memset(a, 0, sizeof(*a));
  FakeMig* m = mig_of(device);
  if (m != NULL) {
    a->multiprocessorCount = m->sms;
    a->gpuInstanceSliceCount = m->slices;
    a->computeInstanceSliceCount = m->ci_slices;
    a->memorySizeMB = m->memory_mib;
    a->sharedCopyEngineCount = m->slices;
  } else {
    a->multiprocessorCount = g->sms;
    a->gpuInstanceSliceCount = 0;
    a->computeInstanceSliceCount = 0;
    a->memorySizeMB = g->memory_mib;
  }
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device, nvmlDeviceAttributes_t* a) {
  return nvmlDeviceGetAttributes_v2(device, a);
}

/* ------------------------------------------------------------------------------------------ */
/* Events                                                                                     */

static int set_index(nvmlEventSet_t set) {
  for (int i = 0; i < MAX_SETS; ++i) {
    if (set == &g_sets[i] && g_sets[i].in_use) return i;
  }
  return -1;
}

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  ENTER("nvmlEventSetCreate");
  if (set == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  for (int i = 0; i < MAX_SETS; ++i) {
    if (!g_sets[i].in_use) {
      memset(&g_sets[i], 0, sizeof(g_sets[i]));
      g_sets[i].in_use = 1;
      *set = &g_sets[i];
      LEAVE(NVML_SUCCESS);
    }
  }
  LEAVE(NVML_ERROR_MEMORY);
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  ENTER("nvmlEventSetFree");
  if (set_index(set) < 0) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  set->in_use = 0;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                     unsigned long long* types) {
  ENTER("nvmlDeviceGetSupportedEventTypes");
  FakeGpu* g = gpu_of(device);
  if (g == NULL || types == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  *types = g->events ? (nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccError |
                        nvmlEventTypeDoubleBitEccError | nvmlEventTypePState)
                     : 0;
  LEAVE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                             nvmlEventSet_t set) {
  ENTER("nvmlDeviceRegisterEvents");
  FakeGpu* g = gpu_of(device);
  if (g == NULL || set_index(set) < 0) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  if (device->is_mig || !g->events) LEAVE(NVML_ERROR_NOT_SUPPORTED);
  set->mask[device->gpu] |= types;
  LEAVE(NVML_SUCCESS);
}

/* Turns one events-file line into pending events of `set`. */
static void parse_event_line(struct nvmlEventSet_st* set, char* line) {
  char key[64], val[512];
  char* p = line;
  unsigned long long xid = 0;
  int have_xid = 0, lost = 0, gpu = -1;
  long gi = -1, ci = -1;
  char uuid[96] = "";
  while (*p == ' ' || *p == '\t') ++p;
  if (strncmp(p, "lost", 4) == 0) {
    lost = 1;
    p += 4;
  }
  while (next_kv(&p, key, sizeof(key), val, sizeof(val))) {
    if (strcmp(key, "xid") == 0) {
      xid = strtoull(val, NULL, 10);
      have_xid = 1;
    } else if (strcmp(key, "uuid") == 0) {
      copy(uuid, sizeof(uuid), val);
    } else if (strcmp(key, "gpu") == 0) {
      gpu = atoi(val);
    } else if (strcmp(key, "gi") == 0) {
      gi = atol(val);
    } else if (strcmp(key, "ci") == 0) {
      ci = atol(val);
    }
  }
  if (lost) {
    set->lost_pending = 1;
    return;
  }
  if (!have_xid) return;
  nvmlEventData_t e;
  memset(&e, 0, sizeof(e));
  e.eventType = nvmlEventTypeXidCriticalError;
  e.eventData = xid;
  e.gpuInstanceId = NVML_INVALID_INSTANCE_ID;
  e.computeInstanceId = NVML_INVALID_INSTANCE_ID;
  if (uuid[0] != '\0') {
    for (unsigned i = 0; i < g_ngpus && gpu < 0; ++i) {
      if (strcmp(g_gpus[i].uuid, uuid) == 0) gpu = (int)i;
      for (int j = 0; j < MAX_MIG && gpu < 0; ++j) {
        FakeMig* m = &g_gpus[i].mig[j];
        if (m->present && strcmp(m->uuid, uuid) == 0) {
          gpu = (int)i;
          gi = m->gi;
          ci = m->ci;
        }
      }
    }
  }
  if (gpu < 0 || (unsigned)gpu >= g_ngpus) return;                   /* not a device of this node */
  if ((set->mask[gpu] & nvmlEventTypeXidCriticalError) == 0) return; /* not registered */
  e.device = &g_gpus[gpu].handle; /* MIG events name the parent GPU, with GI/CI */
  if (gi >= 0) e.gpuInstanceId = (unsigned)gi;
  if (ci >= 0) e.computeInstanceId = (unsigned)ci;
  if (set->npending < MAX_PENDING) set->pending[set->npending++] = e;
}

static void poll_events(struct nvmlEventSet_st* set) {
  if (g_events_path[0] == '\0') return;
  FILE* f = fopen(g_events_path, "r");
  if (f == NULL) return;
  if (fseek(f, 0, SEEK_END) == 0 && ftell(f) < set->offset) set->offset = 0; /* truncated */
  fseek(f, set->offset, SEEK_SET);
  char line[1024];
  while (1) {
    long at = ftell(f);
    if (!fgets(line, sizeof(line), f)) break;
    if (strchr(line, '\n') == NULL) { /* a partial line: read it again later */
      set->offset = at;
      fclose(f);
      return;
    }
    parse_event_line(set, line);
  }
  set->offset = ftell(f);
  fclose(f);
}

EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                        unsigned int timeoutms) {
  ENTER("nvmlEventSetWait_v2");
  if (set_index(set) < 0 || data == NULL) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (1) {
    poll_events(set);
    if (set->lost_pending) {
      set->lost_pending = 0;
      LEAVE(NVML_ERROR_GPU_IS_LOST);
    }
    if (set->npending > 0) {
      *data = set->pending[0];
      memmove(&set->pending[0], &set->pending[1],
              sizeof(set->pending[0]) * (size_t)(set->npending - 1));
      --set->npending;
      LEAVE(NVML_SUCCESS);
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long elapsed =
        (now.tv_sec - start.tv_sec) * 1000LL + (now.tv_nsec - start.tv_nsec) / 1000000LL;
    if (elapsed >= (long long)timeoutms) LEAVE(NVML_ERROR_TIMEOUT);
    /* Sleep without the lock so other threads can call in. */
    pthread_mutex_unlock(&g_mu);
    struct timespec nap = {0, 10 * 1000 * 1000};
    nanosleep(&nap, NULL);
    pthread_mutex_lock(&g_mu);
    if (g_refcount == 0) LEAVE(NVML_ERROR_UNINITIALIZED);
  }
}

EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data,
                                     unsigned int timeoutms) {
  return nvmlEventSetWait_v2(set, data, timeoutms);
}
