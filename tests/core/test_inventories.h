// Inventories built in code for the core tests: the three example shapes and small variants.
#pragma once

#include <cstdio>
#include <string>

#include "core/inventory.h"

namespace gpushare::testing {

// "GPU-00000000-0000-0000-0000-0000000000<i>"-style UUIDs that pass IsGpuUuid/IsMigUuid.
inline std::string GpuUuid(int i) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "GPU-%08x-0000-4000-8000-%012x", 0xa10u, i);
  return buf;
}
inline std::string MigUuid(int gpu, int j) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "MIG-%08x-%04x-4000-8000-%012x", 0x316u, gpu, j);
  return buf;
}

inline Gpu WholeGpu(int index, uint64_t memory_mib = 23028, int numa = -1,
                    const std::string& product = "NVIDIA A10") {
  Gpu g;
  g.index = index;
  g.uuid = GpuUuid(index);
  g.product = product;
  g.memory_mib = memory_mib;
  g.cc_major = 8;
  g.cc_minor = 6;
  g.numa_node = numa;
  return g;
}

inline Gpu MigGpu(int index, const std::string& profile, int count, uint64_t mig_mib,
                  int first_gi = 7, int numa = 0) {
  Gpu g = WholeGpu(index, 81559, numa, "NVIDIA H100 80GB HBM3");
  g.cc_major = 9;
  g.cc_minor = 0;
  g.mig_enabled = true;
  for (int j = 0; j < count; ++j) {
    MigInstance m;
    m.index = j;
    m.profile = profile;
    m.gpu_instance_id = first_gi + j;
    m.compute_instance_id = 0;
    m.uuid = MigUuid(index, j);
    m.memory_mib = mig_mib;
    g.mig.push_back(m);
  }
  return g;
}

inline Inventory EightA10() {
  Inventory inv;
  inv.source = "test";
  for (int i = 0; i < 8; ++i) inv.gpus.push_back(WholeGpu(i, 23028, i < 4 ? 0 : 1));
  return inv;
}

inline Inventory OneH100Mig() {
  Inventory inv;
  inv.source = "test";
  inv.gpus.push_back(MigGpu(0, "1g.10gb", 7, 9856));
  return inv;
}

}  // namespace gpushare::testing
