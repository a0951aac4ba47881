#include "scheduler/inspect.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "scheduler/wire.h"

namespace gpushare::scheduler {

using json = nlohmann::ordered_json;
namespace ms = memshare;
namespace iv = kube::inspect;

// ---- PREFIX/inspect ---------------------------------------------------------------------------

iv::Input InspectInput(const std::vector<std::shared_ptr<const kube::Node>>& nodes,
                       const std::vector<std::shared_ptr<const kube::Pod>>& pods,
                       std::string_view node) {
  std::vector<const kube::Node*> ns;
  for (const auto& n : nodes)
    if (node.empty() || n->metadata.name == node) ns.push_back(n.get());
  std::vector<std::pair<std::string, const kube::Pod*>> ps;
  for (const auto& p : pods)
    if (node.empty() || p->spec.node_name == node) ps.emplace_back(p->Key(), p.get());
  // The API server's order (its storage keys), as `gpushare inspect` receives them.
  std::sort(ns.begin(), ns.end(),
            [](const auto* a, const auto* b) { return a->metadata.name < b->metadata.name; });
  std::sort(ps.begin(), ps.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  iv::Input in;
  in.nodes.reserve(ns.size());
  for (const kube::Node* n : ns) in.nodes.push_back(*n);
  in.pods.reserve(ps.size());
  for (const auto& [key, p] : ps) in.pods.push_back(*p);
  return in;
}

HttpReply ServeInspect(const InspectSource& source, std::string_view rest) {
  if (!rest.empty() && rest != "/" && rest.find('/', 1) != std::string_view::npos)
    return {404, EncodeError("no endpoint: inspect takes PREFIX/inspect or PREFIX/inspect/NODE")};
  const std::string_view node = rest.empty() ? rest : rest.substr(1);
  if (!source.synced())
    return {503, EncodeError("gpushare-scheduler has not listed nodes and pods yet (/readyz)")};
  // Copies of the informers' lists: no lock is held from here on.
  const std::vector<std::shared_ptr<const kube::Node>> nodes = source.nodes();
  if (!node.empty() && std::none_of(nodes.begin(), nodes.end(),
                                    [node](const auto& n) { return n->metadata.name == node; })) {
    return {404, EncodeError("node " + std::string(node) +
                             " is not in gpushare-scheduler's node informer (the API server "
                             "has no such node)")};
  }
  iv::Filter filter;
  filter.node = std::string(node);
  const iv::Input input = InspectInput(nodes, source.pods(), node);
  return {200, iv::ToJson(iv::Build(input, filter)).dump()};
}

// ---- PREFIX/debug/cache -----------------------------------------------------------------------

namespace {

int64_t Bytes(int64_t units, ms::MemoryUnit unit) {
  return units * ms::UnitMiB(unit) * 1048576;
}

json Pod(const InspectPod& p, ms::MemoryUnit unit, bool pending) {
  json o = {{"namespace", p.namespace_},
            {"name", p.name},
            {"uid", p.uid},
            {"units", p.units},
            {"bytes", Bytes(p.units, unit)},
            {"state", p.confirmed ? "confirmed" : "assumed"}};
  if (p.bind_in_flight) o["bindInFlight"] = true;
  json containers = json::object();
  for (const auto& [c, u] : p.containers) containers[c] = u;
  o["containers"] = std::move(containers);
  if (pending) {
    json gpus = json::object();
    for (const auto& [c, g] : p.gpus) gpus[c] = g;
    o["gpus"] = std::move(gpus);
  }
  return o;
}

json Node(const InspectNode& n, ms::MemoryUnit unit) {
  json o = {{"name", n.name}, {"usable", n.usable}};
  if (!n.problem.empty()) {
    o["reason"] = std::string(n.problem_code);
    o["problem"] = n.problem;
  }
  o["maxClientsPerGpu"] = n.max_clients_per_gpu;
  json gpus = json::array();
  for (const InspectGpu& g : n.gpus) {
    json pods = json::array();
    for (const InspectPod& p : g.pods) pods.push_back(Pod(p, unit, false));
    gpus.push_back({{"index", g.gpu.index},
                    {"uuid", g.gpu.uuid},
                    {"model", g.gpu.model},
                    {"health", g.gpu.healthy ? "Healthy" : "Unhealthy"},
                    {"mode", g.gpu.mode},
                    {"usable", g.usable},
                    {"memory",
                     {{"totalBytes", g.gpu.memory_mib * 1048576},
                      {"allocatedBytes", Bytes(g.used_units, unit)}}},
                    {"units", {{"total", g.gpu.units}, {"allocated", g.used_units}}},
                    {"clients", g.clients},
                    {"computeAllocatedPercent", g.core},
                    {"pods", std::move(pods)}});
  }
  o["gpus"] = std::move(gpus);
  json pending = json::array();
  for (const InspectPod& p : n.pending) pending.push_back(Pod(p, unit, true));
  o["pendingPods"] = std::move(pending);
  return o;
}

}  // namespace

std::string EncodeCacheViewNode(const InspectNode& node, ms::MemoryUnit unit) {
  return Node(node, unit).dump();
}

std::string EncodeCacheView(const std::vector<InspectNode>& nodes, ms::MemoryUnit unit) {
  json list = json::array();
  int64_t gpus = 0, total = 0, allocated = 0, units = 0, used = 0, pending = 0;
  for (const InspectNode& n : nodes) {
    list.push_back(Node(n, unit));
    pending += static_cast<int64_t>(n.pending.size());
    for (const InspectGpu& g : n.gpus) {
      ++gpus;
      total += g.gpu.memory_mib * 1048576;
      allocated += Bytes(g.used_units, unit);
      units += g.gpu.units;
      used += g.used_units;
    }
  }
  json o = {{"unit", std::string(ms::MemoryUnitName(unit))},
            {"nodes", std::move(list)},
            {"totals",
             {{"nodes", nodes.size()},
              {"gpus", gpus},
              {"memory", {{"totalBytes", total}, {"allocatedBytes", allocated}}},
              {"units", {{"total", units}, {"allocated", used}}},
              {"pendingPods", pending}}}};
  return o.dump();
}

HttpReply ServeCacheView(const GpuCache& cache, ms::MemoryUnit unit, std::string_view rest) {
  if (rest.empty() || rest == "/") return {200, EncodeCacheView(cache.Inspect(), unit)};
  const std::string_view node = rest.substr(1);
  if (node.find('/') != std::string_view::npos)
    return {404, EncodeError("no endpoint: the cache view takes PREFIX/debug/cache or "
                             "PREFIX/debug/cache/NODE")};
  std::optional<InspectNode> n = cache.InspectOne(node);
  if (!n)
    return {404, EncodeError("node " + std::string(node) +
                             " is not in gpushare-scheduler's cache (not seen by its node "
                             "informer)")};
  return {200, EncodeCacheViewNode(*n, unit)};
}

}  // namespace gpushare::scheduler
