#include "node/gpu_choice.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "base/logfmt.h"
#include "base/sync.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/objects.h"
#include "node/memshare_service.h"
#include "node/node_pods.h"
#include "node/pod_resources.h"

namespace gpushare::node {
namespace {

using logfmt::Value;

// A pod that may be waiting, with the containers that ask the request's size.
struct Candidate {
  choice::PendingAsk ask;
  std::vector<std::string> containers;
};

class NodePendingAsks final : public PendingAsks {
 public:
  explicit NodePendingAsks(GpuChoiceOptions o)
      : opts_(std::move(o)), pod_resources_(opts_.pod_resources_socket) {}

  Status Start() {
    if (opts_.pods) {
      pods_ = opts_.pods;
    } else {
      GPUSHARE_ASSIGN_OR_RETURN(pods_, StartNodePods(opts_.client, opts_.node_name));
    }
    spdlog::info("event=gpu_choice_started node={}", opts_.node_name);
    return Status::Ok();
  }

  std::vector<choice::PendingAsk> Asks(const std::string& resource, int size) override {
    if (!pods_->WaitForSync(opts_.sync_wait))
      spdlog::warn("event=gpu_choice_not_synced resource={} reason={}", resource,
                   Value("the pods of this node are not listed yet"));
    // Pods kubelet already gave the resource may still look Pending here: PodResources drops
    // them. Kubelet is asking for some pod, so when none is left the informer has not seen it
    // yet (kubelet and the informer watch the same bind): the API's own list then.
    std::vector<Candidate> candidates = Candidates(pods_->List(), resource, size);
    std::optional<Holding> holding;
    if (!candidates.empty()) DropHolders(resource, &holding, &candidates);
    if (candidates.empty()) {
      Result<std::vector<std::shared_ptr<const kube::Pod>>> fresh =
          ListNodePods(*opts_.client, opts_.node_name);
      if (fresh.ok()) {
        candidates = Candidates(*fresh, resource, size);
        DropHolders(resource, &holding, &candidates);
      } else {
        spdlog::warn("event=gpu_choice_list_pods_failed resource={} error={}", resource,
                     Value(fresh.status().message()));
      }
    }
    std::vector<choice::PendingAsk> out;
    out.reserve(candidates.size());
    for (Candidate& c : candidates) out.push_back(std::move(c.ask));
    return out;
  }

 private:
  // The pods that may be asking: bound here, not running, finished or going, with a container
  // whose limit of `resource` is `size`.
  static std::vector<Candidate> Candidates(
      const std::vector<std::shared_ptr<const kube::Pod>>& pods, const std::string& resource,
      int size) {
    std::vector<Candidate> out;
    for (const std::shared_ptr<const kube::Pod>& p : pods) {
      if (p->IsTerminal() || p->IsBeingDeleted() || p->status.phase == "Running") continue;
      Candidate c;
      for (const auto* list : {&p->spec.init_containers, &p->spec.containers})
        for (const kube::Container& k : *list)
          if (kube::ExtendedResourceCount(k, resource).value_or(0) == size)
            c.containers.push_back(k.name);
      if (c.containers.empty()) continue;
      Result<GpuSelector> s = ParseGpuSelector(p->metadata.annotations);
      if (!s.ok()) {  // the webhook refuses these; here, no choice to follow
        spdlog::warn("event=gpu_choice_ignored pod={} error={}", p->Key(),
                     Value(s.status().message()));
      } else {
        c.ask.selector = std::move(s).value();
      }
      c.ask.pod = p->Key();
      c.ask.created = p->metadata.creation_timestamp;
      out.push_back(std::move(c));
    }
    return out;
  }

  // (namespace/name, container) of the containers kubelet gave devices of a resource.
  using Holding = std::set<std::pair<std::string, std::string>>;

  // Drops the candidates whose asking containers all hold devices of `resource` already. The
  // first call of an Asks lists PodResources (`*holding`); a failed List drops nothing.
  void DropHolders(const std::string& resource, std::optional<Holding>* holding,
                   std::vector<Candidate>* candidates) {
    if (!holding->has_value()) {
      Result<std::vector<ContainerDevices>> list = [&] {
        MutexLock l(&mu_);
        return pod_resources_.List(opts_.rpc_timeout);
      }();
      holding->emplace();
      if (!list.ok()) {
        spdlog::warn("event=gpu_choice_list_failed resource={} error={}", resource,
                     Value(list.status().message()));
        return;
      }
      for (const ContainerDevices& d : *list)
        if (d.resource == resource && !d.device_ids.empty())
          (*holding)->insert({d.pod_namespace + "/" + d.pod_name, d.container});
    }
    std::erase_if(*candidates, [&](const Candidate& c) {
      return std::all_of(c.containers.begin(), c.containers.end(), [&](const std::string& k) {
        return (*holding)->count({c.ask.pod, k}) > 0;
      });
    });
  }

  GpuChoiceOptions opts_;
  std::shared_ptr<kube::PodInformer> pods_;
  Mutex mu_;
  PodResourcesClient pod_resources_ GPUSHARE_GUARDED_BY(mu_);
};

}  // namespace

Result<std::shared_ptr<PendingAsks>> StartPendingAsks(GpuChoiceOptions options) {
  if (options.node_name.empty() || !options.client)
    return Status::InvalidArgument("GPU choices need a node name and an API client");
  auto asks = std::make_shared<NodePendingAsks>(std::move(options));
  GPUSHARE_RETURN_IF_ERROR(asks->Start());
  return std::shared_ptr<PendingAsks>(std::move(asks));
}

std::shared_ptr<PendingAsks> StartPendingAsksFromFlags(const MemoryShareFlags& flags,
                                                       std::shared_ptr<kube::PodInformer> pods) {
  if (flags.node_name.empty()) {
    spdlog::info("event=gpu_choice_disabled reason=no_node_name");
    return nullptr;
  }
  Result<std::shared_ptr<kube::Client>> client = MakeApiClient(flags.kubeconfig, "GPU choices");
  if (!client.ok()) {
    spdlog::warn("event=gpu_choice_disabled error={}", Value(client.status().message()));
    return nullptr;
  }
  GpuChoiceOptions o;
  o.node_name = flags.node_name;
  o.client = std::move(client).value();
  o.pod_resources_socket = flags.pod_resources_socket;
  o.pods = std::move(pods);
  Result<std::shared_ptr<PendingAsks>> r = StartPendingAsks(std::move(o));
  if (!r.ok()) {
    spdlog::warn("event=gpu_choice_disabled error={}", Value(r.status().message()));
    return nullptr;
  }
  return std::move(r).value();
}

deviceplugin::PreferredChooser GpuChoiceChooser(Inventory inventory, AllocationPolicy policy,
                                                std::shared_ptr<PendingAsks> asks) {
  auto allocator = std::make_shared<deviceplugin::PreferredAllocator>(policy);
  auto models = std::make_shared<std::map<int, std::string>>();
  for (const Gpu& g : inventory.gpus) (*models)[g.index] = g.product;
  return [allocator, models, asks](
             const deviceplugin::DeviceIndex& index,
             const deviceplugin::PreferredAllocationQuery& q) -> Result<std::vector<std::string>> {
    const std::string& resource = index.resource().name;
    std::vector<choice::PendingAsk> pending = asks->Asks(resource, q.allocation_size);
    const auto gpu_of = [&](const std::string& id) {
      const PlannedDevice* d = index.Find(id);
      if (d == nullptr) return choice::DeviceGpu{};
      auto m = models->find(d->gpu_index);
      return choice::DeviceGpu{d->gpu_index, m == models->end() ? "" : m->second, d->gpu_uuid};
    };
    choice::ChoiceVerdict v = choice::RestrictChoice(q.available, q.must_include, q.allocation_size,
                                                     gpu_of, std::move(pending));
    if (v.rule == choice::ChoiceRule::kUnsatisfiable) {
      std::string why;
      for (const std::string& e : v.excluded) why += (why.empty() ? "" : " | ") + e;
      spdlog::warn("event=gpu_choice_unsatisfiable resource={} size={} free={} excluded={}",
                   resource, q.allocation_size, q.available.size(), Value(why));
    } else if (v.rule != choice::ChoiceRule::kNone) {
      spdlog::info("event=gpu_choice resource={} size={} rule={} pod={} allowed={}", resource,
                   q.allocation_size, choice::ChoiceRuleName(v.rule), Value(v.pod),
                   v.available.size());
    }
    deviceplugin::PreferredAllocationQuery restricted = q;
    restricted.available = std::move(v.available);
    return allocator->Choose(index, restricted);
  };
}

}  // namespace gpushare::node
