#include "node/node_pods.h"

#include <spdlog/spdlog.h>

namespace gpushare::node {

Result<std::shared_ptr<kube::PodInformer>> StartNodePods(std::shared_ptr<kube::Client> client,
                                                         const std::string& node_name) {
  if (!client || node_name.empty())
    return Status::InvalidArgument("the pods of a node need an API client and the node's name");
  kube::InformerOptions po;
  po.field_selector = "spec.nodeName=" + node_name;
  po.log = [](const std::string& line) { spdlog::warn("component=node_pod_informer {}", line); };
  auto pods = std::make_shared<kube::PodInformer>(std::move(client), po);
  GPUSHARE_RETURN_IF_ERROR(pods->Start());
  return pods;
}

Result<std::vector<std::shared_ptr<const kube::Pod>>> ListNodePods(kube::Client& client,
                                                                   const std::string& node_name) {
  kube::ListOptions lo;
  lo.field_selector = "spec.nodeName=" + node_name;
  GPUSHARE_ASSIGN_OR_RETURN(std::vector<kube::Pod> fresh, client.ListPods("", lo));
  std::vector<std::shared_ptr<const kube::Pod>> pods;
  pods.reserve(fresh.size());
  for (kube::Pod& p : fresh) pods.push_back(std::make_shared<const kube::Pod>(std::move(p)));
  return pods;
}

}  // namespace gpushare::node
