// The simulated inventory file: a YAML description of a node's GPUs, for machines without
// GPUs (--inventory FILE), demos (examples/inventory/) and tests. The schema, with every field
// of core's Gpu and MigInstance, is documented in docs/inventory.md. Validation is total, one
// line per problem naming the field, e.g. "gpus[1].uuid: duplicate of gpus[0].uuid".
#pragma once

#include <memory>
#include <string>

#include "gpu/inventory_source.h"

namespace gpushare {

// Parses inventory YAML text; `source_name` appears in locations ("8x-a10.yaml:12:5").
Result<Inventory> ParseInventoryYaml(const std::string& text, const std::string& source_name);

// Reads and parses a file. Inventory::source is set to the path.
Result<Inventory> LoadInventoryFile(const std::string& path);

std::unique_ptr<InventorySource> MakeFileInventorySource(std::string path);

}  // namespace gpushare
