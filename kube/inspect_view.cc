#include "kube/inspect_view.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>
#include <string_view>

#include "base/strings.h"
#include "core/allocation_json.h"
#include "core/allocation_record.h"
#include "core/memshare.h"
#include "core/reasons.h"
#include "kube/memshare_pod.h"
#include "kube/quantity.h"

namespace gpushare::kube::inspect {
namespace {

namespace ms = memshare;
using Json = nlohmann::ordered_json;

bool IsReasonCode(std::string_view r) {
  return std::find(std::begin(reasons::kAll), std::end(reasons::kAll), r) !=
         std::end(reasons::kAll);
}

bool IsGpuResource(std::string_view name) {
  return name.starts_with("nvidia.com/") || name.starts_with("aliyun.com/gpu");
}

int64_t WholeQuantity(const StringMap& m, const std::string& key) {
  auto it = m.find(key);
  if (it == m.end()) return 0;
  Result<int64_t> v = ParseWholeQuantity(it->second, key);
  return v.ok() ? *v : 0;
}

class Builder {
 public:
  Builder(const Input& in, const Filter& f) : in_(in), f_(f) {}

  View Run() {
    for (const Node& n : in_.nodes) {
      if (!f_.node.empty() && n.metadata.name != f_.node) continue;
      AddNode(n);
    }
    for (const Pod& p : in_.pods) {
      if (p.IsTerminal()) continue;
      if (!f_.namespace_.empty() && p.metadata.namespace_ != f_.namespace_) continue;
      if (p.spec.node_name.empty()) {
        if (f_.node.empty()) AddPending(p);
        continue;
      }
      auto it = nodes_.find(p.spec.node_name);
      if (it != nodes_.end()) AddPod(p, it->second);
    }
    View v;
    for (auto& [name, nb] : nodes_) v.nodes.push_back(Finish(std::move(nb)));
    v.pending = std::move(pending_);
    std::sort(v.pending.begin(), v.pending.end(), [](const auto& a, const auto& b) {
      return std::tie(a.namespace_, a.name) < std::tie(b.namespace_, b.name);
    });
    return v;
  }

 private:
  struct NodeBuild {
    NodeView view;
    int64_t unit_mib = 1024;
    int64_t share_units = 0;  // memshare::UniformShareUnits
    int64_t memory_gpus = 0, healthy_memory_gpus = 0;
    std::map<int, GpuView> gpus;  // by index
    std::map<std::string, ResourceView> resources;
  };

  void AddNode(const Node& n) {
    NodeBuild b;
    b.view.name = n.metadata.name;
    b.view.address = n.Address("InternalIP");
    b.view.ready = n.IsReady();
    b.view.unschedulable = n.unschedulable;
    bool gpu_node = false;
    auto inv_it = n.metadata.annotations.find(std::string(ms::kInventoryAnnotation));
    if (inv_it != n.metadata.annotations.end()) {
      Result<ms::NodeInventory> inv = ms::DecodeInventory(inv_it->second);
      if (inv.ok()) {
        gpu_node = true;
        b.view.inventory = true;
        b.view.unit = std::string(ms::MemoryUnitName(inv->unit));
        b.unit_mib = ms::UnitMiB(inv->unit);
        b.share_units = ms::UniformShareUnits(*inv);
        for (const ms::InventoryGpu& g : inv->gpus) {
          if (g.mode != ms::kMemoryMode || g.units <= 0) continue;
          ++b.memory_gpus;
          b.healthy_memory_gpus += g.healthy ? 1 : 0;
        }
        for (const ms::InventoryGpu& g : inv->gpus) {
          GpuView& gv = b.gpus[g.index];
          gv.index = g.index;
          gv.uuid = g.uuid;
          gv.model = g.model;
          gv.mode = g.mode;
          gv.health = g.healthy ? "Healthy" : "Unhealthy";
          gv.units_total = g.mode == ms::kMemoryMode ? g.units : 0;
          gv.memory_total_mib = g.mode == ms::kMemoryMode ? g.units * b.unit_mib : g.memory_mib;
        }
      } else {
        b.view.problems.push_back(std::string(ms::kInventoryAnnotation) + ": " +
                                  inv.status().message());
      }
    }
    for (const auto& [name, q] : n.status.capacity) {
      if (!IsGpuResource(name)) continue;
      gpu_node = true;
      ResourceView& r = b.resources[name];
      r.name = name;
      r.capacity = WholeQuantity(n.status.capacity, name);
      r.allocatable = WholeQuantity(n.status.allocatable, name);
    }
    // A node without any GPU resource is shown only once a pod records devices on it.
    nodes_[n.metadata.name] = std::move(b);
    if (gpu_node) shown_.insert(n.metadata.name);
  }

  // The GPU of this index, created (health unknown) when the node did not publish it; second:
  // whether it was created.
  static std::pair<GpuView&, bool> GpuAt(NodeBuild& b, int index) {
    auto [it, fresh] = b.gpus.try_emplace(index);
    if (fresh) {
      it->second.index = index;
      it->second.health = "Unknown";
    }
    return {it->second, fresh};
  }

  // ... with the model and memory the record gives.
  static GpuView& GpuFor(NodeBuild& b, int index, const alloc::AllocationRecord& rec) {
    auto [g, fresh] = GpuAt(b, index);
    for (const alloc::GpuRecord& r : rec.gpus) {
      if (!fresh || r.index != index) continue;
      g.uuid = r.uuid;
      g.model = r.model;
      g.memory_total_mib = r.memory_mib;
    }
    return g;
  }

  // A container's memory-share units, as the scheduler's annotations place them.
  static ContainerShare Units(const ms::ContainerShare& c, int64_t unit_mib) {
    ContainerShare out;
    out.name = c.name;
    out.resource = c.milli > 0 ? ms::kMilliResource : ms::kResourceName;
    out.kind = c.milli == 0 ? "memory" : (c.whole ? "whole" : "fraction");
    out.units = c.units;
    out.memory_mib = c.units * unit_mib;
    return out;
  }

  static PodShare ShareOf(const Pod& p, const std::string& source) {
    PodShare s;
    s.namespace_ = p.metadata.namespace_;
    s.name = p.metadata.name;
    s.phase = p.status.phase.empty() ? "Pending" : p.status.phase;
    s.source = source;
    return s;
  }

  void AddPod(const Pod& p, NodeBuild& b) {
    const auto& ann = p.metadata.annotations;
    auto rec_it = ann.find(std::string(alloc::kAllocationsAnnotation));
    if (rec_it != ann.end()) {
      Result<alloc::AllocationRecord> rec = alloc::DecodeAllocationRecord(rec_it->second);
      if (rec.ok()) return AddRecorded(p, *rec, b);
      b.view.problems.push_back("pod " + p.Key() + ": " +
                                std::string(alloc::kAllocationsAnnotation) + ": " +
                                rec.status().message());
    }
    Result<ms::PodRequest> req = PodGpuRequest(p);
    if (!req.ok() || req->empty()) return;
    if (req->unresolved()) {
      // Fractions and whole GPUs: units of this node's GPU size, as gpushare-scheduler books them.
      Result<ms::PodRequest> on_node = req->Resolve(b.share_units);
      if (!on_node.ok()) {
        b.view.problems.push_back(
            "pod " + p.Key() + ": " + std::string(ms::kMilliResource) + ": not counted: " +
            (b.memory_gpus == 0 ? "no GPU of the node serves memory shares"
                                : "the node's memory-share GPUs differ in size (fractions and "
                                  "whole GPUs need GPUs of one size)"));
        return;
      }
      req = std::move(on_node);
    }
    shown_.insert(b.view.name);
    ms::PodAssignment a = ms::ResolveAssignment(ann, *req);
    for (const std::string& problem : a.problems)
      b.view.problems.push_back("pod " + p.Key() + ": " + problem);
    const std::string source = a.state == ms::AssignmentState::kConfirmed ? "confirmed" : "assumed";
    if (a.state == ms::AssignmentState::kNone) {
      PodShare s = ShareOf(p, "unplaced");
      for (const ms::ContainerShare& c : req->app) s.containers.push_back(Units(c, b.unit_mib));
      s.memory_mib = std::max(req->PodUnits(), req->MaxInitUnits()) * b.unit_mib;
      b.view.pending_memory_mib += s.memory_mib;
      b.view.unplaced.push_back(std::move(s));
      return;
    }
    for (const auto& [index, use] : ms::GpuUsage(*req, a.gpus)) {
      GpuView& g = GpuAt(b, index).first;
      PodShare s = ShareOf(p, source);
      int64_t milli = 0;  // of alibabacloud.com/gpu-milli on this GPU
      for (const ms::ContainerShare& c : req->app) {
        auto at = a.gpus.find(c.name);
        if (at == a.gpus.end() || at->second != index) continue;
        s.containers.push_back(Units(c, b.unit_mib));
        milli += c.whole ? ms::kMilliPerGpu : c.milli;
      }
      s.memory_mib = use.units * b.unit_mib;
      g.units_allocated += use.units;
      g.memory_allocated_mib += s.memory_mib;
      g.clients += use.clients;
      g.compute_percent += use.core;
      g.pods.push_back(std::move(s));
      const std::string_view resource = req->milli() ? ms::kMilliResource : ms::kResourceName;
      ResourceView& r = b.resources[std::string(resource)];
      if (req->milli() && r.name.empty()) {  // no node advertises it: its GPUs x 1000
        r.capacity = b.memory_gpus * ms::kMilliPerGpu;
        r.allocatable = b.healthy_memory_gpus * ms::kMilliPerGpu;
      }
      r.name = resource;
      r.allocated += req->milli() ? milli : use.units;
    }
  }

  void AddRecorded(const Pod& p, const alloc::AllocationRecord& rec, NodeBuild& b) {
    shown_.insert(b.view.name);
    std::map<int, PodShare> by_gpu;
    for (const alloc::ContainerRecord& c : rec.containers) {
      std::map<int, ContainerShare> parts;
      for (const alloc::DeviceRecord& d : c.devices) {
        ResourceView& r = b.resources[c.resource];
        r.name = c.resource;
        r.allocated += d.kind == alloc::DeviceKind::kMemory ? d.units : 1;
        ContainerShare& cs = parts[d.gpu];
        cs.name = c.name;
        cs.resource = c.resource;
        cs.kind = alloc::DeviceKindName(d.kind);
        cs.ids.push_back(d.id);
        if (d.replica >= 0) cs.replicas.push_back(d.replica);
        if (!d.mig.empty()) cs.mig = d.mig;
        if (!d.profile.empty()) cs.profile = d.profile;
        cs.units += d.units;
        cs.memory_mib += d.memory_mib;
      }
      for (auto& [gpu, cs] : parts) {
        PodShare& s = by_gpu.try_emplace(gpu, ShareOf(p, "allocations")).first->second;
        s.memory_mib += cs.memory_mib;
        s.containers.push_back(std::move(cs));
      }
    }
    for (auto& [index, s] : by_gpu) {
      if (index < 0) {  // a device whose GPU is unknown
        b.view.unplaced.push_back(std::move(s));
        continue;
      }
      GpuView& g = GpuFor(b, index, rec);
      g.memory_allocated_mib += s.memory_mib;
      g.clients += static_cast<int>(s.containers.size());
      for (const ContainerShare& cs : s.containers) {
        if (cs.kind == "memory") {
          g.units_allocated += cs.units;
        } else {
          g.devices_used += static_cast<int64_t>(cs.ids.size());
        }
      }
      g.pods.push_back(std::move(s));
    }
  }

  void AddPending(const Pod& p) {
    PendingPod pp;
    for (const Container& c : p.spec.containers) {
      std::set<std::string> names;  // limits and requests name the same resources
      for (const auto* m : {&c.resources.limits, &c.resources.requests}) {
        for (const auto& [name, q] : *m) {
          if (IsGpuResource(name)) names.insert(name);
        }
      }
      for (const std::string& name : names) {
        Result<int64_t> v = ExtendedResourceCount(c, name);
        if (v.ok() && *v > 0) pp.requests[name] += *v;
      }
    }
    if (pp.requests.empty()) return;
    pp.namespace_ = p.metadata.namespace_;
    pp.name = p.metadata.name;
    const Event* newest = nullptr;
    for (const Event& e : in_.events) {
      const ObjectReference& o = e.involved_object;
      if (o.kind != "Pod" || o.name != pp.name || o.namespace_ != pp.namespace_) continue;
      if (!o.uid.empty() && !p.metadata.uid.empty() && o.uid != p.metadata.uid) continue;
      if (!IsReasonCode(e.reason)) continue;
      if (newest == nullptr || Stamp(e) > Stamp(*newest)) newest = &e;
    }
    if (newest != nullptr) {
      pp.reason = newest->reason;
      pp.message = OneLine(newest->message);
    } else if (const Condition* c = p.FindCondition("PodScheduled");
               c != nullptr && c->status == "False") {
      pp.reason = c->reason;
      pp.message = OneLine(c->message);
    }
    pending_.push_back(std::move(pp));
  }

  static const std::string& Stamp(const Event& e) {
    return !e.last_timestamp.empty()    ? e.last_timestamp
           : !e.first_timestamp.empty() ? e.first_timestamp
                                        : e.metadata.creation_timestamp;
  }

  NodeView Finish(NodeBuild b) {
    NodeView v = std::move(b.view);
    for (auto& [index, g] : b.gpus) {
      std::sort(g.pods.begin(), g.pods.end(), [](const auto& x, const auto& y) {
        return std::tie(x.namespace_, x.name) < std::tie(y.namespace_, y.name);
      });
      v.memory_total_mib += g.memory_total_mib;
      v.memory_allocated_mib += g.memory_allocated_mib;
      v.gpus.push_back(std::move(g));
    }
    v.memory_allocated_mib += v.pending_memory_mib;
    for (auto& [name, r] : b.resources) v.resources.push_back(std::move(r));
    return v;
  }

 public:
  // Nodes that have anything to do with GPUs.
  std::set<std::string> shown_;

 private:
  const Input& in_;
  const Filter& f_;
  std::map<std::string, NodeBuild> nodes_;
  std::vector<PendingPod> pending_;
};

nlohmann::json YamlToJson(const YAML::Node& y) {
  switch (y.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& kv : y) o[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& e : y) a.push_back(YamlToJson(e));
      return a;
    }
    case YAML::NodeType::Scalar: {
      const std::string s = y.Scalar();
      if (y.Tag() == "!") return s;  // quoted
      if (s == "true" || s == "false") return s == "true";
      if (s == "null" || s == "~") return nullptr;
      if (!s.empty() && s.find_first_not_of("-0123456789") == std::string::npos && s != "-") {
        try {
          return std::stoll(s);
        } catch (...) {
        }
      }
      return s;
    }
    default:
      return nullptr;
  }
}

}  // namespace

// The JSON form (docs/inspect.md), one writer per struct. nlohmann's adl_serializer finds them
// by the struct's namespace (hence here, outside the unnamed namespace, and static), so a
// vector of structs becomes an array of their objects.

// {"allocated":A,"total":T}, the form of every memory and unit pair.
static Json Usage(int64_t allocated, int64_t total) {
  return {{"allocated", allocated}, {"total", total}};
}

static void to_json(Json& j, const ContainerShare& c) {
  j["name"] = c.name;
  j["resource"] = c.resource;
  j["kind"] = c.kind;
  j["devices"] = c.ids;
  if (!c.replicas.empty()) j["replicas"] = c.replicas;
  if (!c.mig.empty()) j["mig"] = c.mig;
  if (!c.profile.empty()) j["profile"] = c.profile;
  if (c.units > 0) j["units"] = c.units;
  j["memoryMiB"] = c.memory_mib;
}

static void to_json(Json& j, const PodShare& s) {
  j["namespace"] = s.namespace_;
  j["name"] = s.name;
  j["phase"] = s.phase;
  j["source"] = s.source;
  j["memoryMiB"] = s.memory_mib;
  j["containers"] = s.containers;
}

static void to_json(Json& j, const GpuView& g) {
  j["index"] = g.index;
  j["uuid"] = g.uuid;
  j["model"] = g.model;
  j["mode"] = g.mode;
  j["health"] = g.health;
  j["memoryMiB"] = Usage(g.memory_allocated_mib, g.memory_total_mib);
  if (g.units_total > 0 || g.units_allocated > 0)
    j["units"] = Usage(g.units_allocated, g.units_total);
  j["devicesUsed"] = g.devices_used;
  j["clients"] = g.clients;
  if (g.compute_percent > 0) j["computePercent"] = g.compute_percent;
  j["pods"] = g.pods;
}

static void to_json(Json& j, const ResourceView& r) {
  j["name"] = r.name;
  j["capacity"] = r.capacity;
  j["allocatable"] = r.allocatable;
  j["allocated"] = r.allocated;
}

static void to_json(Json& j, const NodeView& n) {
  j["name"] = n.name;
  j["address"] = n.address;
  j["ready"] = n.ready;
  j["unschedulable"] = n.unschedulable;
  j["unit"] = n.unit;
  j["memoryMiB"] = Usage(n.memory_allocated_mib, n.memory_total_mib);
  j["pendingMemoryMiB"] = n.pending_memory_mib;
  j["gpus"] = n.gpus;
  j["resources"] = n.resources;
  j["unplaced"] = n.unplaced;
  j["problems"] = n.problems;
}

static void to_json(Json& j, const PendingPod& p) {
  j["namespace"] = p.namespace_;
  j["name"] = p.name;
  j["requests"] = p.requests;  // an object, {} when empty
  j["reason"] = p.reason;
  j["message"] = p.message;
}

static void to_json(Json& j, const Totals& t) {
  j["nodes"] = t.nodes;
  j["gpus"] = t.gpus;
  j["unhealthyGpus"] = t.unhealthy_gpus;
  j["memoryMiB"] = Usage(t.memory_allocated_mib, t.memory_total_mib);
  j["pendingMemoryMiB"] = t.pending_memory_mib;
  j["pods"] = t.pods;
  j["pendingPods"] = t.pending_pods;
}

// Sorts the items of a List (or one object) into nodes, pods and events; other kinds are
// skipped. Errors name the item.
Status AddObjects(const nlohmann::json& j, Input* in, const std::string& where) {
  if (!j.is_object()) return Status::InvalidArgument(where + ": expected an object");
  const auto kind_it = j.find("kind");
  const std::string kind =
      kind_it != j.end() && kind_it->is_string() ? kind_it->get<std::string>() : "";
  if (kind.ends_with("List") || j.contains("items")) {
    const auto it = j.find("items");
    if (it == j.end() || it->is_null()) return Status::Ok();
    if (!it->is_array()) return Status::InvalidArgument(where + ".items: expected an array");
    for (size_t i = 0; i < it->size(); ++i) {
      GPUSHARE_RETURN_IF_ERROR(
          AddObjects((*it)[i], in, where + ".items[" + std::to_string(i) + "]"));
    }
    return Status::Ok();
  }
  auto fail = [&where](const Status& s) {
    return Status::InvalidArgument(where + " (" + s.message() + ")");
  };
  if (kind == "Node") {
    Result<kube::Node> n = kube::DecodeNode(j);
    if (!n.ok()) return fail(n.status());
    in->nodes.push_back(std::move(*n));
  } else if (kind == "Pod") {
    Result<kube::Pod> p = kube::DecodePod(j);
    if (!p.ok()) return fail(p.status());
    in->pods.push_back(std::move(*p));
  } else if (kind == "Event") {
    Result<kube::Event> e = kube::DecodeEvent(j);
    if (!e.ok()) return fail(e.status());
    in->events.push_back(std::move(*e));
  }
  return Status::Ok();
}

Result<Input> ParseObjects(std::string_view text, const std::string& name) {
  Input in;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_discarded()) {
    GPUSHARE_RETURN_IF_ERROR(AddObjects(j, &in, name));
    return in;
  }
  try {
    int doc = 0;
    for (const YAML::Node& y : YAML::LoadAll(std::string(text))) {
      if (!y.IsNull()) {
        GPUSHARE_RETURN_IF_ERROR(
            AddObjects(YamlToJson(y), &in, name + " document " + std::to_string(doc)));
      }
      ++doc;
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(name + ": neither JSON nor YAML: " + e.what());
  }
  return in;
}

View Build(const Input& input, const Filter& filter) {
  Builder b(input, filter);
  View v = b.Run();
  std::erase_if(v.nodes, [&b](const NodeView& n) { return !b.shown_.contains(n.name); });
  // Totals again, over the nodes shown.
  Totals t;
  std::set<std::string> pods;
  for (const NodeView& n : v.nodes) {
    ++t.nodes;
    t.gpus += static_cast<int>(n.gpus.size());
    for (const GpuView& g : n.gpus) {
      if (g.health == "Unhealthy") ++t.unhealthy_gpus;
      for (const PodShare& p : g.pods) pods.insert(p.namespace_ + "/" + p.name);
    }
    t.memory_total_mib += n.memory_total_mib;
    t.memory_allocated_mib += n.memory_allocated_mib;
    t.pending_memory_mib += n.pending_memory_mib;
  }
  t.pods = static_cast<int>(pods.size());
  t.pending_pods = static_cast<int>(v.pending.size());
  v.totals = t;
  return v;
}

Json ToJson(const View& v) {
  Json j;
  j["apiVersion"] = "gpushare.io/v1";
  j["kind"] = "Inspect";
  j["nodes"] = v.nodes;
  j["pending"] = v.pending;
  j["totals"] = v.totals;
  return j;
}

}  // namespace gpushare::kube::inspect
