// The simulated inventory file: a YAML description of a node's GPUs, for machines without
// GPUs (--inventory FILE), demos (examples/inventory/) and tests. The schema, with every field
// of core's Gpu and MigInstance, is documented in docs/inventory.md. Validation is total, one
// line per problem naming the field, e.g. "gpus[1].uuid: duplicate of gpus[0].uuid", at most
// 20 listed and the rest counted. The file has the config file's bounds (config/file_read.h):
// a regular file of at most 1 MiB and 20,000 YAML values.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gpu/inventory_source.h"

namespace gpushare {

// The largest inventory file read. A node of 64 GPUs with seven MIG devices each, every field
// written, is 93 KB and 8,073 YAML values.
inline constexpr int64_t kMaxInventoryFileBytes = int64_t{1} << 20;

// Parses inventory YAML text; `source_name` appears in locations ("8x-a10.yaml:12:5").
Result<Inventory> ParseInventoryYaml(const std::string& text, const std::string& source_name);

// Reads and parses a file. Inventory::source is set to the path.
Result<Inventory> LoadInventoryFile(const std::string& path);

std::unique_ptr<InventorySource> MakeFileInventorySource(std::string path);

}  // namespace gpushare
