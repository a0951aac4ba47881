// Client configuration: where the API server is and how to authenticate to it, loaded either
// from the pod's service account (in-cluster) or from a kubeconfig file.
//
// Precedence (LoadClientConfig), as kubectl and client-go behave for a component:
//   1. an explicit kubeconfig path (the binaries' --kubeconfig flag);
//   2. the KUBECONFIG environment variable: a colon-separated list of files, merged the way
//      kubectl merges them (for clusters, users and contexts the first file that defines a
//      name wins; current-context comes from the first file that sets it; files that do not
//      exist are skipped);
//   3. in-cluster, when KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are set;
//   4. ~/.kube/config.
// Everything read from files (CA bundle, client certificate and key) is loaded once, here;
// only the bearer token file is re-read while running (kube/token.h). Errors name the file and
// the field, e.g. `kubeconfig /home/a/.kube/config: users[name=admin].user.client-key-data:
// base64: invalid character at offset 12`.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpushare::kube {

struct ClientConfig {
  std::string server;  // "https://10.96.0.1:443" (scheme, host, port; no path)
  std::string ca_pem;  // CA bundle (PEM); empty: the system trust store
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;  // verify the server certificate for this name instead
  std::string token;            // fixed bearer token
  std::string token_file;       // bearer token file (wins over `token`; re-read on change)
  std::string client_cert_pem;  // client certificate (PEM) for mutual TLS
  std::string client_key_pem;
  std::string namespace_ = "default";  // the default namespace (service account or context)
  std::string source;                  // where this came from, for logs
  std::vector<std::string> warnings;   // non-fatal findings (e.g. in-cluster CA file missing)
};

// Reads environment variables; injectable for tests. Returns nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
EnvLookup ProcessEnv();

struct InClusterOptions {
  // Directory with token, ca.crt and namespace (the service-account volume).
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  EnvLookup env;  // default: the process environment
};

// In-cluster configuration: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, the
// service-account token file (required, re-read on rotation), ca.crt (a warning when missing,
// as client-go does) and the namespace file (default "default" when missing).
Result<ClientConfig> LoadInClusterConfig(const InClusterOptions& options = {});

struct KubeconfigOptions {
  std::vector<std::string> paths;  // merged in order; missing files are skipped unless it is
                                   // the only one (an explicit --kubeconfig must exist)
  bool explicit_path = false;      // paths came from --kubeconfig: a missing file is an error
  std::string context;             // use this context instead of current-context
};

Result<ClientConfig> LoadKubeconfig(const KubeconfigOptions& options);

struct LoadOptions {
  std::string kubeconfig;  // --kubeconfig value; empty: not given
  std::string context;     // --context value; empty: current-context
  InClusterOptions in_cluster;
  EnvLookup env;  // default: the process environment (KUBECONFIG, HOME, KUBERNETES_*)
};

Result<ClientConfig> LoadClientConfig(const LoadOptions& options);

}  // namespace gpushare::kube
