// Test objects for gpushare-scheduler's tests: nodes with a gpushare.io/gpu-inventory
// annotation (as gpushare-node in memory mode writes it), pods asking for aliyun.com/gpu-mem,
// and the Knative seed workload's pods.
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/memshare.h"
#include "kube/memshare_pod.h"
#include "kube/objects.h"
#include "scheduler/cache.h"

namespace gpushare::scheduler::testing {

using json = nlohmann::json;

// A synced cache (default options) whose log lines are appended to `*log`, which must outlive it.
inline std::unique_ptr<GpuCache> SyncedCache(std::string* log) {
  CacheOptions o;
  o.log = [log](const std::string& l) { *log += l + "\n"; };
  auto c = std::make_unique<GpuCache>(o);
  c->SetSynced(true);
  return c;
}

struct GpuSpec {
  int64_t units = 24;
  bool healthy = true;
  std::string mode = "memory";
  std::string model = "NVIDIA A10";
};

inline memshare::NodeInventory Inventory(const std::vector<GpuSpec>& gpus, int max_clients = 48,
                                         memshare::MemoryUnit unit = memshare::MemoryUnit::kGiB) {
  memshare::NodeInventory inv;
  inv.unit = unit;
  inv.max_clients_per_gpu = max_clients;
  for (size_t i = 0; i < gpus.size(); ++i) {
    memshare::InventoryGpu g;
    g.index = static_cast<int>(i);
    g.uuid = "GPU-" + std::to_string(1000 + i) + "-0000-0000-0000-000000000000";
    g.model = gpus[i].model;
    g.units = gpus[i].units;
    g.memory_mib = gpus[i].units * memshare::UnitMiB(unit) + 300;
    g.healthy = gpus[i].healthy;
    g.mode = gpus[i].mode;
    inv.gpus.push_back(g);
  }
  return inv;
}

inline std::vector<GpuSpec> Uniform(int n, int64_t units) {
  return std::vector<GpuSpec>(n, GpuSpec{units});
}

// A Node object: the inventory annotation, allocatable aliyun.com/gpu-mem (the healthy units,
// as kubelet would count them) and aliyun.com/gpu-count.
inline json NodeJson(const std::string& name, const memshare::NodeInventory& inv) {
  int64_t units = 0;
  for (const auto& g : inv.gpus)
    if (g.ServesMemoryShares()) units += g.units;
  json n = {{"kind", "Node"},
            {"metadata",
             {{"name", name},
              {"annotations",
               {{std::string(memshare::kInventoryAnnotation), memshare::EncodeInventory(inv)}}}}},
            {"status",
             {{"capacity",
               {{"aliyun.com/gpu-mem", std::to_string(units)},
                {"aliyun.com/gpu-count", std::to_string(inv.gpus.size())}}},
              {"allocatable",
               {{"aliyun.com/gpu-mem", std::to_string(units)},
                {"aliyun.com/gpu-count", std::to_string(inv.gpus.size())}}},
              {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  return n;
}

inline json NodeJson(const std::string& name, const std::vector<GpuSpec>& gpus,
                     int max_clients = 48) {
  return NodeJson(name, Inventory(gpus, max_clients));
}

struct ContainerSpec {
  std::string name;
  int64_t units = 0;  // 0: no aliyun.com/gpu-mem (a sidecar)
  bool init = false;
};

// A Pending pod with the given containers (limits only, as Knative and most users write it).
inline json PodJson(const std::string& name, const std::vector<ContainerSpec>& containers,
                    const std::string& ns = "default", const std::string& uid = "") {
  json c = json::array(), ic = json::array();
  for (const ContainerSpec& s : containers) {
    json one = {{"name", s.name}, {"image", "registry.example/" + s.name + ":1"}};
    if (s.units > 0)
      one["resources"] = {{"limits", {{"aliyun.com/gpu-mem", std::to_string(s.units)}}}};
    (s.init ? ic : c).push_back(one);
  }
  json p = {{"kind", "Pod"},
            {"metadata", {{"name", name}, {"namespace", ns}}},
            {"spec", {{"containers", c}}},
            {"status", {{"phase", "Pending"}}}};
  if (!ic.empty()) p["spec"]["initContainers"] = ic;
  if (!uid.empty()) p["metadata"]["uid"] = uid;
  return p;
}

// A pod whose one container asks alibabacloud.com/gpu-milli (a fraction, or whole GPUs).
inline json MilliPod(const std::string& name, int64_t milli) {
  json p = PodJson(name, {{"main", 0}}, "default", "uid-" + name);
  p["spec"]["containers"][0]["resources"] = {
      {"limits", {{std::string(memshare::kMilliResource), std::to_string(milli)}}}};
  return p;
}

inline json SimplePod(const std::string& name, int64_t units, const std::string& uid = "") {
  return PodJson(name, {{"main", units}}, "default", uid.empty() ? "uid-" + name : uid);
}

// `pod` with a compute share of `pct` percent on its first container (ACK's resource by default).
inline json WithCore(json pod, int64_t pct,
                     const char* resource = "aliyun.com/gpu-core.percentage") {
  pod["spec"]["containers"][0]["resources"]["limits"][resource] = std::to_string(pct);
  return pod;
}

inline kube::Node DecodeNodeOrDie(const json& j) {
  return *kube::DecodeNode(j);
}
inline kube::Pod DecodePodOrDie(const json& j) {
  return *kube::DecodePod(j);
}
// The memory-share request of a pod's JSON (valid by construction in the tests).
inline memshare::PodRequest Req(const json& pod) {
  return *kube::PodPlacementRequest(DecodePodOrDie(pod));
}

inline std::string SeedManifestPath() {
  return std::string(GPUSHARE_SHARED_DIR) + "/examples/seed-manifests/knative-gpu-mem-sharing.yaml";
}

// What the seed Knative Service asks for, read from the manifest (tests that call it link
// yaml-cpp). False when the manifest is absent.
struct SeedService {
  std::string service, ns, container, image;
  int64_t units = 0;
  int max_scale = 0;
  int container_concurrency = 0;
};

inline bool ReadSeedService(SeedService* s) {
  if (!std::filesystem::exists(SeedManifestPath())) return false;
  YAML::Node m = YAML::LoadFile(SeedManifestPath());
  s->service = m["metadata"]["name"].as<std::string>();
  s->ns = m["metadata"]["namespace"].as<std::string>("default");
  YAML::Node t = m["spec"]["template"];
  s->max_scale =
      std::stoi(t["metadata"]["annotations"]["autoscaling.knative.dev/maxScale"].as<std::string>());
  s->container_concurrency = t["spec"]["containerConcurrency"].as<int>();
  YAML::Node c = t["spec"]["containers"][0];
  s->container = c["name"].as<std::string>();
  s->image = c["image"].as<std::string>();
  s->units = std::stoll(c["resources"]["limits"]["aliyun.com/gpu-mem"].as<std::string>());
  return true;
}

// The pods Knative Serving creates for revision 1 of the seed Service: the Service's
// containers as written (user-container with limits aliyun.com/gpu-mem: "3") plus the
// queue-proxy sidecar Knative injects (CPU only). `units` is read from the manifest by the
// caller. Knative names the pods <service>-00001-deployment-<replicaset hash>-<random>.
inline json KnativePod(const std::string& service, const std::string& ns, int i,
                       const std::string& container, const std::string& image, int64_t units) {
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%05x", 0x1a2b3 + i * 7919);
  json p = {{"kind", "Pod"},
            {"metadata",
             {{"name", service + "-00001-deployment-7d9f8c6b5-" + std::string(suffix)},
              {"namespace", ns},
              {"uid", "knative-uid-" + std::to_string(i)},
              {"labels",
               {{"serving.knative.dev/service", service},
                {"serving.knative.dev/revision", service + "-00001"}}},
              {"annotations",
               {{"autoscaling.knative.dev/maxScale", "100"},
                {"autoscaling.knative.dev/minScale", "0"}}}}},
            {"spec",
             {{"containers",
               {{{"name", container},
                 {"image", image},
                 {"ports", {{{"containerPort", 6666}, {"name", "user-port"}, {"protocol", "TCP"}}}},
                 {"resources",
                  {{"limits", {{"aliyun.com/gpu-mem", std::to_string(units)}}},
                   {"requests", {{"aliyun.com/gpu-mem", std::to_string(units)}}}}}},
                {{"name", "queue-proxy"},
                 {"image", "gcr.io/knative-releases/knative.dev/serving/cmd/queue:v1.12"},
                 {"env", {{{"name", "CONTAINER_CONCURRENCY"}, {"value", "1"}}}},
                 {"resources", {{"requests", {{"cpu", "25m"}}}}}}}},
              {"schedulerName", "default-scheduler"}}},
            {"status", {{"phase", "Pending"}}}};
  return p;
}

}  // namespace gpushare::scheduler::testing
