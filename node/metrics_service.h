// MetricsService: gpushare-node's metrics and health, wired together for the binary: the
// NodeMetrics the agent reports to (AgentOptions::observer), the scraper, the HTTP server
// (--metrics-listen, --metrics-auth, --metrics-names: gpushare.metrics in the config), the
// authorizer of /metrics callers and the Events of refused Allocates (node/allocate_events.h).
//
// What needs the Kubernetes API (the TokenReviews of --metrics-auth=kubernetes, the Events) uses
// --kubeconfig (else $KUBECONFIG, in-cluster, ~/.kube/config); Events also need the node's name
// (--node-name, $NODE_NAME: the Node they are about, and whose pods a refusal is looked up
// among, to put its Event on the pod instead). Without a usable API
// configuration the agent still serves: /metrics then answers 503 (callers cannot be checked)
// and no Events are recorded, each said once in the log. A listen address that cannot be bound is
// logged and the agent serves devices without metrics (its liveness probe then fails, which
// makes the problem visible without stopping GPU allocation). A bad setting (auth none on a
// non-loopback address, an unknown names value) is an error: exit 2.
#pragma once

#include <memory>
#include <string>

#include "base/clock.h"
#include "core/node_config.h"
#include "core/status.h"
#include "node/allocate_events.h"
#include "node/library_gc.h"
#include "node/metrics.h"

namespace gpushare::node {

struct MetricsServiceOptions {
  MetricsSettings settings;
  std::string node_name;  // "" = the host name for the `node` label, and no Events
  std::string kubeconfig;
  std::string pod_resources_socket;
  std::shared_ptr<InterposerPaths> interposer_paths;  // optional: every stateDir loaded
  std::string version, commit;
  std::shared_ptr<Clock> clock = RealClock();  // the agent's (for /healthz)
};

class MetricsService {
 public:
  virtual ~MetricsService() = default;
  virtual std::shared_ptr<NodeMetrics> metrics() = 0;
  // The Events of refused Allocates; null without the API or a node name.
  virtual std::shared_ptr<AllocateEvents> allocate_events() = 0;
  virtual int port() const = 0;  // 0 when not serving
};

// Null service (nothing served) when settings.listen is empty.
Result<std::unique_ptr<MetricsService>> StartMetricsService(MetricsServiceOptions options);

}  // namespace gpushare::node
