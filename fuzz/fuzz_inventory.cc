// Fuzzes the simulated inventory reader (--inventory FILE): YAML describing GPUs and MIG devices.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gpu/file_inventory.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto inventory = gpushare::ParseInventoryYaml(text, "fuzz.yaml");
  if (!inventory.ok() && inventory.status().message().empty()) __builtin_trap();
  return 0;
}
