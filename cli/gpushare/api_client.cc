#include "cli/gpushare/api_client.h"

#include <cstdio>

namespace gpushare::cli {

std::optional<ApiClient> ConnectApi(std::string_view command, const std::string& kubeconfig,
                                    const std::string& context,
                                    const kube::ClientOptions& options) {
  const std::string name(command);
  kube::LoadOptions lo;
  lo.kubeconfig = kubeconfig;
  lo.context = context;
  Result<kube::ClientConfig> cfg = kube::LoadClientConfig(lo);
  if (!cfg.ok()) {
    std::fprintf(stderr, "gpushare %s: no usable Kubernetes API configuration: %s\n", name.c_str(),
                 cfg.status().message().c_str());
    return std::nullopt;
  }
  Result<std::shared_ptr<kube::Client>> client = kube::Client::Create(*cfg, options);
  if (!client.ok()) {
    std::fprintf(stderr, "gpushare %s: Kubernetes API client: %s\n", name.c_str(),
                 client.status().message().c_str());
    return std::nullopt;
  }
  return ApiClient{std::move(*client), std::move(*cfg)};
}

}  // namespace gpushare::cli
