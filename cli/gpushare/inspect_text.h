// The text forms of the inspect view (kube/inspect_view.h) that only `gpushare inspect` prints,
// and the file it reads API objects from (--file). The view itself, and its JSON, stay in kube/:
// gpushare-scheduler serves them too.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "kube/inspect_view.h"

namespace gpushare::cli::inspect {

using kube::inspect::Input;
using kube::inspect::View;

// API objects (kube::inspect::ParseObjects) from a file of at most 64 MiB.
Result<Input> ReadObjectsFile(const std::string& path);

// The JSON document (kube::inspect::ToJson) as YAML (block style, keys in the JSON's order).
std::string ToYaml(const nlohmann::ordered_json& json);

// Text forms. `Table`: Alibaba's `kubectl inspect gpushare` columns (NAME, IPADDRESS,
// GPUi(Allocated/Total), PENDING(Allocated) when any, GPU Memory(GiB)) and the cluster totals,
// then the pending pods with their reasons. `Detail` (-d): per node, every pod and its share of
// each GPU. `Wide`: one line per GPU (model, mode, health, memory, devices, clients, pods).
std::string Table(const View& view);
std::string Detail(const View& view);
std::string Wide(const View& view);

}  // namespace gpushare::cli::inspect
