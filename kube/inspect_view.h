// The inspect view: who uses which GPU, and how much of it, built from the API objects alone.
// `gpushare inspect` prints it (a table, -d, wide, JSON, YAML: cli/gpushare/inspect_text.h) and
// gpushare-scheduler serves it as JSON on PREFIX/inspect and PREFIX/inspect/NODE, so both show the
// same thing. docs/inspect.md documents the columns and the JSON schema.
//
// Where the facts come from:
//   - GPUs of a node: the node annotation gpushare.io/gpu-inventory (memory mode publishes it),
//     else the GPUs the pods' gpushare.io/allocations name (model and memory are in the record);
//   - which pod holds what: gpushare.io/allocations (gpushare-node writes it in every mode from
//     kubelet's PodResources), else, for memory shares not yet recorded, the scheduler's
//     gpushare.io/gpu-mem-confirmed / -assumed (and Alibaba's ALIYUN_COM_GPU_MEM_IDX);
//   - devices offered per resource: the node's status capacity and allocatable;
//   - pending GPU pods (not bound, asking for a GPU resource): the newest Event whose reason is
//     a code of core/reasons.h, else the PodScheduled condition's reason and message.
// Pods that finished (Succeeded, Failed) hold nothing and are left out. Pure: no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "kube/objects.h"

namespace gpushare::kube::inspect {

struct Input {
  std::vector<Node> nodes;
  std::vector<Pod> pods;
  std::vector<Event> events;
};

struct Filter {
  std::string node;        // "": every node (with a node: no pending pods)
  std::string namespace_;  // "": every namespace; else only that namespace's pods count
};

// One container's share of one GPU.
struct ContainerShare {
  std::string name;
  std::string resource;
  std::string kind;              // whole, replica, mig, memory, unknown
  std::vector<std::string> ids;  // device IDs (memory: the least unit ID)
  std::vector<int> replicas;     // replica numbers, when replicated
  std::string mig;               // MIG device UUID
  std::string profile;           // MIG profile
  int64_t units = 0;             // memory units
  int64_t memory_mib = 0;        // memory reserved on this GPU (0: shared, not reserved)
};

struct PodShare {
  std::string namespace_;
  std::string name;
  std::string phase;
  std::string source;  // "allocations", "confirmed", "assumed"
  int64_t memory_mib = 0;
  std::vector<ContainerShare> containers;
};

struct GpuView {
  int index = 0;
  std::string uuid;
  std::string model;
  std::string mode;    // memory, exclusive, time-slicing, mig, ... ("" when not published)
  std::string health;  // Healthy, Unhealthy, Unknown
  int64_t memory_total_mib = 0;      // memory mode: units x unit; else the GPU's memory
  int64_t memory_allocated_mib = 0;  // what the pods on it reserve
  int64_t units_total = 0;           // memory mode
  int64_t units_allocated = 0;
  int64_t devices_used = 0;     // replicas, MIG instances or whole GPUs held
  int clients = 0;              // containers on it
  int64_t compute_percent = 0;  // compute shares on it (aliyun.com/gpu-core.percentage, ...)
  std::vector<PodShare> pods;
};

struct ResourceView {
  std::string name;
  int64_t capacity = 0;
  int64_t allocatable = 0;
  int64_t allocated = 0;  // devices the recorded pods hold (memory: units)
};

struct NodeView {
  std::string name;
  std::string address;  // InternalIP
  bool ready = false;
  bool unschedulable = false;
  std::string unit = "GiB";
  bool inventory = false;  // gpushare.io/gpu-inventory was readable
  std::vector<GpuView> gpus;
  std::vector<ResourceView> resources;
  // Memory of pods bound here that no GPU holds yet (Alibaba's PENDING(Allocated)).
  int64_t pending_memory_mib = 0;
  std::vector<PodShare> unplaced;  // those pods
  int64_t memory_total_mib = 0;
  int64_t memory_allocated_mib = 0;
  std::vector<std::string> problems;  // unreadable annotations, named
};

struct PendingPod {
  std::string namespace_;
  std::string name;
  std::map<std::string, int64_t> requests;  // GPU resources of the pod
  std::string reason;
  std::string message;
};

struct Totals {
  int nodes = 0;
  int gpus = 0;
  int unhealthy_gpus = 0;
  int64_t memory_total_mib = 0;
  int64_t memory_allocated_mib = 0;
  int64_t pending_memory_mib = 0;
  int pods = 0;  // pods holding GPUs
  int pending_pods = 0;
};

struct View {
  std::vector<NodeView> nodes;  // sorted by name
  std::vector<PendingPod> pending;
  Totals totals;
};

// Sorts the items of a List (or one object) into nodes, pods and events; other kinds are
// skipped. Errors name the item (`where`, then .items[i]).
Status AddObjects(const nlohmann::json& object, Input* input, const std::string& where);
// API objects as `kubectl get nodes,pods,events -A -o json|yaml` prints them: one JSON document,
// or YAML documents separated by ---. `name` starts the error messages.
Result<Input> ParseObjects(std::string_view text, const std::string& name);

View Build(const Input& input, const Filter& filter = {});

// The JSON form (docs/inspect.md): {"apiVersion":"gpushare.io/v1","kind":"Inspect",
// "nodes":[...],"pending":[...],"totals":{...}}.
nlohmann::ordered_json ToJson(const View& view);

}  // namespace gpushare::kube::inspect
