// NodePods: the pods bound to this node, from one pod informer on spec.nodeName=<node>, shared by
// the parts of gpushare-node that read them (gpushare.io/allocations: node/allocation_recorder.h;
// GPU choices: node/gpu_choice.h), so that a node opens one watch of its pods for both, not one
// each (1,213 nodes are 1,213 watches on the API server, not 2,426).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kube/informer.h"

namespace gpushare::node {

// Starts the informer (it stops when the last holder lets it go). kInvalidArgument without a
// node name or client.
Result<std::shared_ptr<kube::PodInformer>> StartNodePods(std::shared_ptr<kube::Client> client,
                                                         const std::string& node_name);

// The pods bound to `node_name` as the API has them now (one list, a consistent read), in the
// informer's shape: for a decision that must not miss a pod bound a moment ago.
Result<std::vector<std::shared_ptr<const kube::Pod>>> ListNodePods(kube::Client& client,
                                                                   const std::string& node_name);

}  // namespace gpushare::node
