// See pod_resources.h.
#include "node/pod_resources.h"

#include <grpcpp/grpcpp.h>

#include <map>

#include "proto/podresources/v1/api.grpc.pb.h"

namespace gpushare::node {

struct PodResourcesClient::Stub {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<::v1::PodResourcesLister::Stub> lister;
};

PodResourcesClient::PodResourcesClient(std::string socket)
    : socket_(std::move(socket)), stub_(std::make_unique<Stub>()) {
  stub_->channel = grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials());
  stub_->lister = ::v1::PodResourcesLister::NewStub(stub_->channel);
}

PodResourcesClient::~PodResourcesClient() = default;

Result<std::vector<ContainerDevices>> PodResourcesClient::List(std::chrono::milliseconds timeout) {
  ::v1::ListPodResourcesRequest req;
  ::v1::ListPodResourcesResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  grpc::Status s = stub_->lister->List(&ctx, req, &resp);
  if (!s.ok()) {
    std::string m = "PodResources List on " + socket_ + ": " + s.error_message() + " (gRPC code " +
                    std::to_string(static_cast<int>(s.error_code())) + ")";
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) return Status::ResourceExhausted(m);
    return Status::Unavailable(m);
  }
  std::vector<ContainerDevices> out;
  for (const ::v1::PodResources& p : resp.pod_resources()) {
    for (const ::v1::ContainerResources& c : p.containers()) {
      std::map<std::string, size_t> by_resource;  // index into out
      for (const ::v1::ContainerDevices& d : c.devices()) {
        auto [it, fresh] = by_resource.emplace(d.resource_name(), out.size());
        if (fresh) out.push_back({p.namespace_(), p.name(), c.name(), d.resource_name(), {}});
        for (const std::string& id : d.device_ids()) out[it->second].device_ids.push_back(id);
      }
    }
  }
  return out;
}

}  // namespace gpushare::node
