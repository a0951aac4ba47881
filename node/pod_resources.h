// PodResourcesClient: kubelet's PodResources v1 List (the socket
// /var/lib/kubelet/pod-resources/kubelet.sock), flattened to what gpushare-node needs: which
// device IDs of which resource kubelet has allocated to which container. Used by memory mode's
// reconciler (node/memshare_service.h) and by the collection of per-container state
// (node/library_gc.h). Kubelet rate-limits the API (100 requests/s, burst 10): a refusal is
// kResourceExhausted; anything else that fails is kUnavailable. Thread-compatible (one caller
// at a time, or one client per thread).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpushare::node {

// One container's devices of one resource, as PodResources lists them (entries of one
// resource merged, device IDs in kubelet's order).
struct ContainerDevices {
  std::string pod_namespace;
  std::string pod_name;
  std::string container;
  std::string resource;
  std::vector<std::string> device_ids;
};

class PodResourcesClient {
 public:
  explicit PodResourcesClient(std::string socket);
  ~PodResourcesClient();
  PodResourcesClient(const PodResourcesClient&) = delete;
  PodResourcesClient& operator=(const PodResourcesClient&) = delete;

  Result<std::vector<ContainerDevices>> List(std::chrono::milliseconds timeout);
  const std::string& socket() const { return socket_; }

 private:
  struct Stub;
  std::string socket_;
  std::unique_ptr<Stub> stub_;
};

}  // namespace gpushare::node
