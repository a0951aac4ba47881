// Fuzzes the trace readers of `gpushare simulate`: the pod list and node list CSVs.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto pods = gpushare::sim::ParsePodCsv("pods.csv", text);
  if (!pods.ok() && pods.status().message().empty()) __builtin_trap();
  auto nodes = gpushare::sim::ParseNodeCsv("nodes.csv", text);
  if (!nodes.ok() && nodes.status().message().empty()) __builtin_trap();
  return 0;
}
