// MemShareEnv: one GPU node with memory shares, out of real processes and doubles, for the
// end-to-end tests: the fake-apiserver binary (HTTP), the REAL gpushare-node (device plugins on
// unix sockets, the API over HTTP, kubelet's PodResources over a unix socket), the kubelet
// double in this process (Registration, device plugin calls, PodResources v1), and, when a
// test wants it, the REAL gpushare-scheduler driven by the kube-scheduler double.
//
// The test plays kubelet's remaining parts itself: it registers the Node, copies the device
// plugin's counts into the Node's capacity/allocatable (kubelet's node status), admits the
// pods bound to the node in the order the test chooses (AdmitPod: init containers first) and
// writes the outcome into the pod's status (Running, or Failed with UnexpectedAdmissionError).
// Waits are on observable state (port files, the Node annotation, kubelet's counts, log
// lines), never plain sleeps.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/memshare.h"
#include "kube/client.h"
#include "kube/memshare_pod.h"
#include "tests/fakes/kubelet/fake_kubelet.h"
#include "tests/node/agent_process.h"
#include "tests/scheduler/processes.h"

namespace gpushare::e2e {

using json = nlohmann::json;
using kube::testing::WaitUntil;
namespace ms = memshare;

inline constexpr const char* kMem = "aliyun.com/gpu-mem";
inline constexpr const char* kMilli = "alibabacloud.com/gpu-milli";

inline std::string GpuUuidFor(int i) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "GPU-%08x-7e57-4000-8000-%012x", 0xe2eu, i);
  return buf;
}

struct NodeSpec {
  std::string name = "gpu-node-1";
  std::vector<uint64_t> gpu_mib = std::vector<uint64_t>(8, 24576);  // 8 x 24 GiB
  std::string memory_shares = "    devices: all\n";                 // under gpushare.memoryShares
  int max_clients = 48;
  std::vector<std::string> agent_args;  // extra gpushare-node flags
  fakes::FakeKubeletOptions kubelet;    // dirs are filled in
};

class MemShareEnv {
 public:
  explicit MemShareEnv(NodeSpec spec = {}) : spec_(std::move(spec)) {}
  ~MemShareEnv() { StopAgent(SIGTERM); }

  const NodeSpec& spec() const { return spec_; }
  const std::string& dir() const { return tmp_.path(); }
  std::shared_ptr<kube::Client> api() const { return client_; }
  const std::string& kubeconfig() const { return kubeconfig_; }
  fakes::FakeKubelet& kubelet() { return *kubelet_; }
  testing::AgentProcess* agent() { return agent_.get(); }
  std::string state_dir() const { return tmp_.File("state"); }

  // The API server, the Node, kubelet and the agent; then waits until the agent serves.
  void Start() {
    StartApi();
    AddNode();
    StartKubelet();
    StartAgent();
    WaitServing();
  }

  void StartApi() {
    api_ = std::make_unique<scheduler::testing::ApiServerProcess>(GPUSHARE_FAKE_APISERVER_BIN,
                                                                  tmp_.path());
    ASSERT_TRUE(api_->ok()) << "fake-apiserver did not start";
    client_ = kube::testing::MakeClient(api_->url(), {0, 1});
    kubeconfig_ = scheduler::testing::WriteKubeconfig(tmp_.path(), api_->url());
  }

  // The Node as kubelet registers it: Ready, no GPU information yet.
  void AddNode() {
    json n = {
        {"kind", "Node"},
        {"metadata", {{"name", spec_.name}, {"labels", {{"kubernetes.io/hostname", spec_.name}}}}},
        {"status",
         {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}},
          {"capacity", {{"cpu", "64"}}},
          {"allocatable", {{"cpu", "64"}}}}}};
    ASSERT_TRUE(client_->Create(kube::kNodes, "", n).ok());
  }

  void StartKubelet() {
    fakes::FakeKubeletOptions o = spec_.kubelet;
    o.plugin_dir = tmp_.File("dp");
    o.pod_resources_socket = tmp_.File("pr/kubelet.sock");
    kubelet_ = std::make_unique<fakes::FakeKubelet>(o);
    ASSERT_TRUE(kubelet_->Start().ok());
  }

  std::string WriteInputs() {
    std::string inv = "version: v1\ngpus:\n";
    for (size_t i = 0; i < spec_.gpu_mib.size(); ++i) {
      inv += "- index: " + std::to_string(i) + "\n  uuid: " + GpuUuidFor(static_cast<int>(i)) +
             "\n  product: NVIDIA A10\n  memoryMiB: " + std::to_string(spec_.gpu_mib[i]) +
             "\n  computeCapability: \"8.6\"\n  numaNode: " +
             std::to_string(i < spec_.gpu_mib.size() / 2 ? 0 : 1) + "\n";
    }
    kube::testing::WriteFile(tmp_.File("inventory.yaml"), inv);
    kube::testing::WriteFile(tmp_.File("lib/libgpushare-cuda.so"),
                             "");  // the interposer's host copy
    kube::testing::WriteFile(
        tmp_.File("config.yaml"),
        "version: v1\ngpushare:\n  maxClientsPerGpu: " + std::to_string(spec_.max_clients) +
            "\n  interposer:\n    hostDir: " + tmp_.File("lib") + "\n    stateDir: " + state_dir() +
            "\n  memoryShares:\n" + spec_.memory_shares);
    return tmp_.File("inventory.yaml");
  }

  void StartAgent(std::vector<std::string> extra = {}) {
    WriteInputs();
    std::vector<std::string> args = {"--inventory",
                                     tmp_.File("inventory.yaml"),
                                     "--config",
                                     tmp_.File("config.yaml"),
                                     "--device-plugin-dir",
                                     tmp_.File("dp"),
                                     "--node-name",
                                     spec_.name,
                                     "--kubeconfig",
                                     kubeconfig_,
                                     "--pod-resources-socket",
                                     tmp_.File("pr/kubelet.sock"),
                                     "--reconcile-interval",
                                     "2s",
                                     "--log-level",
                                     "info"};
    args.insert(args.end(), spec_.agent_args.begin(), spec_.agent_args.end());
    args.insert(args.end(), extra.begin(), extra.end());
    agent_ = std::make_unique<testing::AgentProcess>(
        args, tmp_.File("agent." + std::to_string(agent_runs_++) + ".log"));
    ASSERT_TRUE(agent_->started());
  }

  // SIGTERM (or SIGKILL) and wait; the log stays readable.
  void StopAgent(int sig) {
    if (!agent_ || !agent_->Running()) return;
    agent_->Signal(sig);
    agent_->Wait(std::chrono::seconds(20));
  }

  int64_t TotalUnits() const {
    int64_t n = 0;
    for (uint64_t m : spec_.gpu_mib) n += static_cast<int64_t>(m / 1024);
    return n;
  }

  // kubelet sees every unit, the Node carries the inventory, the agent's reconciler runs.
  void WaitServing(size_t log_marks = 1) {
    ASSERT_TRUE(kubelet_->WaitForAllocatable(kMem, static_cast<int>(TotalUnits()),
                                             std::chrono::seconds(30)))
        << AgentLog();
    ASSERT_TRUE(WaitUntil([&] { return Inventory().gpus.size() == spec_.gpu_mib.size(); }))
        << AgentLog();
    ASSERT_TRUE(WaitUntil([&] { return Count(AgentLog(), "event=memshare_ready") >= log_marks; }))
        << AgentLog();
    SyncNodeStatus();
  }

  static size_t Count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  std::string AgentLog() const { return agent_ ? agent_->Log() : std::string(); }

  ms::NodeInventory Inventory() const {
    Result<kube::Node> n = client_->GetNode(spec_.name);
    if (!n.ok()) return {};
    auto it = n->metadata.annotations.find(std::string(ms::kInventoryAnnotation));
    if (it == n->metadata.annotations.end()) return {};
    Result<ms::NodeInventory> inv = ms::DecodeInventory(it->second);
    return inv.ok() ? *inv : ms::NodeInventory{};
  }

  // kubelet's node status: capacity/allocatable of the device plugin resource.
  void SyncNodeStatus() {
    std::optional<fakes::FakeResource> r = kubelet_->Resource(kMem);
    ASSERT_TRUE(r.has_value());
    json status = {{"capacity", {{kMem, std::to_string(r->capacity)}}},
                   {"allocatable", {{kMem, std::to_string(r->allocatable)}}}};
    ASSERT_TRUE(client_->PatchNodeStatus(spec_.name, status).ok());
  }

  // A pod already bound to this node with the scheduler's annotations (for tests of the node
  // alone): `demand_gpus` per app container, assume time `t`.
  void AddBoundPod(const json& pod_in, const std::vector<int>& demand_gpus, int64_t t) {
    json pod = pod_in;
    pod["spec"]["nodeName"] = spec_.name;
    Result<kube::Pod> p = kube::DecodePod(pod);
    ASSERT_TRUE(p.ok());
    Result<ms::PodRequest> req = kube::PodGpuRequest(*p);
    ASSERT_TRUE(req.ok());
    const ms::NodeInventory inv = Inventory();
    const ms::InventoryGpu* g = inv.FindByIndex(demand_gpus.at(0));
    if (req->milli()) req = req->Resolve(ms::UniformShareUnits(inv));  // as the scheduler does
    ASSERT_TRUE(req.ok());
    for (const auto& [k, v] : ms::BindAnnotations(*req, demand_gpus, g ? g->units : 0, t))
      pod["metadata"]["annotations"][k] = v;
    Result<json> r =
        client_->Create(kube::kPods, pod["metadata"].value("namespace", "default"), pod);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  // kubelet admits the pod: every container in kubelet's order, then (unless told not to)
  // the pod's phase.
  fakes::PodAdmission Admit(const std::string& ns, const std::string& name,
                            bool set_status = true) {
    fakes::PodAdmission out;
    Result<kube::Pod> p = client_->GetPod(ns, name);
    EXPECT_TRUE(p.ok()) << ns << "/" << name;
    if (!p.ok()) return out;
    fakes::FakePod fp;
    fp.namespace_ = ns;
    fp.name = name;
    fp.uid = p->metadata.uid;
    auto convert = [](const kube::Container& c) {
      fakes::FakeContainer fc{c.name, {}};
      for (const char* r : {kMem, kMilli}) {
        Result<int64_t> n = kube::ExtendedResourceCount(c, r);
        if (n.ok() && *n > 0) fc.resources[r] = static_cast<int>(*n);
      }
      return fc;
    };
    for (const kube::Container& c : p->spec.init_containers)
      fp.init_containers.push_back(convert(c));
    for (const kube::Container& c : p->spec.containers) fp.containers.push_back(convert(c));
    out = kubelet_->AdmitPod(fp);
    if (set_status) SetPhase(ns, name, out);
    return out;
  }

  void SetPhase(const std::string& ns, const std::string& name, const fakes::PodAdmission& out) {
    json status = out.admitted ? json{{"phase", "Running"}}
                               : json{{"phase", "Failed"},
                                      {"reason", "UnexpectedAdmissionError"},
                                      {"message", out.error}};
    EXPECT_TRUE(client_->PatchPodStatus(ns, name, status).ok());
  }

  // GPU index of each unit ID's GPU, through the node's inventory file.
  int GpuOf(const std::string& unit_id) const {
    Result<ms::UnitId> u = ms::ParseUnitDeviceId(unit_id);
    if (!u.ok()) return -1;
    for (size_t i = 0; i < spec_.gpu_mib.size(); ++i) {
      if (GpuUuidFor(static_cast<int>(i)) == u->gpu_uuid) return static_cast<int>(i);
    }
    return -1;
  }

  // The truth: pod key -> container -> GPU, from kubelet's allocation records.
  std::map<std::string, ms::ContainerGpus> KubeletTruth() const {
    std::map<std::string, ms::ContainerGpus> out;
    for (const fakes::AllocationRecord& r : kubelet_->Allocations()) {
      if (r.resource != kMem && r.resource != kMilli) continue;
      std::set<int> gpus;
      for (const std::string& id : r.device_ids) gpus.insert(GpuOf(id));
      // Whole GPUs of alibabacloud.com/gpu-milli: the container's demands in GPU order.
      EXPECT_TRUE(gpus.size() == 1u ||
                  (r.resource == kMilli && r.device_ids.size() == gpus.size() * 1000))
          << r.pod_name << "/" << r.container << " holds units of several GPUs";
      int i = 0;
      for (int g : gpus) {
        out[r.pod_namespace + "/" + r.pod_name]
           [i == 0 ? r.container : ms::WholeGpuSlotName(r.container, i)] = g;
        ++i;
      }
    }
    return out;
  }

  // Waits until every pod kubelet admitted says, in its annotations, what kubelet really did.
  bool WaitTruthful(std::chrono::milliseconds limit = std::chrono::milliseconds(60000)) {
    return WaitUntil([&] { return Untruthful().empty(); }, limit);
  }

  // Pods whose annotations do not (yet) match kubelet's records, with why.
  std::vector<std::string> Untruthful() const {
    std::vector<std::string> out;
    for (const auto& [key, gpus] : KubeletTruth()) {
      const std::string ns = key.substr(0, key.find('/')), name = key.substr(key.find('/') + 1);
      Result<kube::Pod> p = client_->GetPod(ns, name);
      if (!p.ok()) {
        out.push_back(key + ": " + p.status().message());
        continue;
      }
      Result<ms::PodRequest> req = kube::PodGpuRequest(*p);
      if (req.ok() && req->milli()) req = req->Resolve(ms::UniformShareUnits(Inventory()));
      if (!req.ok()) {
        out.push_back(key + ": " + req.status().message());
        continue;
      }
      ms::PodAssignment a = ms::ResolveAssignment(p->metadata.annotations, *req);
      ms::ContainerGpus app;  // kubelet's records name app and init containers alike
      for (const auto& [c, g] : a.gpus) app[c] = g;
      bool same = a.state == ms::AssignmentState::kConfirmed;
      for (const auto& [c, g] : gpus) same = same && app.count(c) && app[c] == g;
      if (!same) {
        out.push_back(key + ": annotations say " + ms::EncodeContainerGpus(a.gpus) + " (" +
                      std::string(ms::AssignmentStateName(a.state)) + "), kubelet gave " +
                      ms::EncodeContainerGpus(gpus));
      }
    }
    return out;
  }

  // Units per GPU held according to kubelet, checked against each GPU's size.
  std::map<int, int64_t> UnitsPerGpu() const {
    std::map<int, int64_t> use;
    std::set<std::string> seen;
    for (const fakes::AllocationRecord& r : kubelet_->Allocations()) {
      if (r.resource != kMem || r.init) continue;
      for (const std::string& id : r.device_ids) {
        EXPECT_TRUE(seen.insert(id).second) << id << " given to two containers";
        use[GpuOf(id)]++;
      }
    }
    for (const auto& [g, n] : use) {
      EXPECT_LE(n, static_cast<int64_t>(spec_.gpu_mib.at(g) / 1024))
          << "GPU " << g << " holds more than its memory";
    }
    return use;
  }

  // What Allocate returned to one container: the GPU and the limit, from the units alone.
  void ExpectAllocateAnswer(const fakes::AllocationRecord& r) const {
    const auto& env = r.response.envs();
    const int gpu = GpuOf(r.device_ids.at(0));
    const std::string units = std::to_string(r.device_ids.size());
    auto get = [&](const std::string& k) {
      return env.count(k) ? env.at(k) : std::string("<unset>");
    };
    EXPECT_EQ(get("NVIDIA_VISIBLE_DEVICES"), GpuUuidFor(gpu)) << r.pod_name;
    EXPECT_EQ(get("ALIYUN_COM_GPU_MEM_IDX"), std::to_string(gpu)) << r.pod_name;
    EXPECT_EQ(get("ALIYUN_COM_GPU_MEM_CONTAINER"), units) << r.pod_name;
    EXPECT_EQ(get("ALIYUN_COM_GPU_MEM_DEV"), std::to_string(spec_.gpu_mib.at(gpu) / 1024))
        << r.pod_name;
    // The memory limit for the in-container library: units x 1 GiB, in its environment and in
    // the config file mounted at /etc/gpushare/config.
    EXPECT_EQ(get("CUDA_DEVICE_MEMORY_LIMIT_0"), std::to_string(r.device_ids.size() * 1024) + "m")
        << r.pod_name;
    std::string config_host;
    for (const auto& m : r.response.mounts()) {
      if (m.container_path() == "/etc/gpushare/config") config_host = m.host_path();
    }
    ASSERT_FALSE(config_host.empty()) << r.pod_name << ": no config mount";
    const std::string config = kube::testing::ReadFile(config_host);
    EXPECT_NE(config.find("device.0.uuid=" + GpuUuidFor(gpu) + "\n"), std::string::npos) << config;
    EXPECT_NE(
        config.find("device.0.memory_limit=" + std::to_string(r.device_ids.size() * 1024) + "m\n"),
        std::string::npos)
        << config;
  }

 private:
  NodeSpec spec_;
  kube::testing::TempDir tmp_;
  std::unique_ptr<scheduler::testing::ApiServerProcess> api_;
  std::shared_ptr<kube::Client> client_;
  std::string kubeconfig_;
  std::unique_ptr<fakes::FakeKubelet> kubelet_;
  std::unique_ptr<testing::AgentProcess> agent_;
  int agent_runs_ = 0;
};

}  // namespace gpushare::e2e
