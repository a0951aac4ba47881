// The Kubernetes API client of a `gpushare` subcommand, found as kubectl finds its cluster
// (--kubeconfig, then $KUBECONFIG, in-cluster, ~/.kube/config; --context).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kube/client.h"
#include "kube/config.h"

namespace gpushare::cli {

struct ApiClient {
  std::shared_ptr<kube::Client> client;
  kube::ClientConfig config;
};

// Prints "gpushare COMMAND: ..." naming what is wrong and returns nullopt when there is no
// usable configuration or the client cannot be made.
std::optional<ApiClient> ConnectApi(std::string_view command, const std::string& kubeconfig,
                                    const std::string& context, const kube::ClientOptions& options);

}  // namespace gpushare::cli
