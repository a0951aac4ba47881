// Fuzzes the node config loader: NVIDIA's device-plugin config (v1) plus gpushare's section,
// validated totally, as gpushare-node and `gpushare validate` read it. Any input must give a
// config or an error naming what is wrong, within the loader's bounds; never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/node_config_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  gpushare::NodeConfigFlags flags;
  gpushare::Environment env;
  auto loaded = gpushare::LoadNodeConfigFromText(flags, env, text, "fuzz.yaml");
  if (!loaded.ok() && loaded.status().message().empty())
    __builtin_trap();  // an error names what is wrong
  return 0;
}
