// FakeKubeScheduler: a double of kube-scheduler as an HTTP-extender client, written from
// ../shared/reference/kubernetes-protocols.md §3 (and nothing else), for tests of
// gpushare-scheduler and of the whole memory-share path.
//
// What it does like kube-scheduler, unpleasant parts included:
//   - requests: always POST, Content-Type application/json, User-Agent Go-http-client/1.1,
//     Accept-Encoding: gzip (added by Go's transport, which inflates a gzip reply), URL =
//     urlPrefix with trailing slashes trimmed + "/" + verb; the exact JSON Go's encoding/json
//     writes for the untagged extender types: capitalised keys in field order, `null` for
//     unset fields (`"Nodes":null` with NodeNames in node-cache mode, `"NodeNames":null` with
//     a full NodeList otherwise);
//     embedded Pod and Node objects as the API's JSON without kind/apiVersion (informer objects);
//     the whole call bounded by httpTimeout (0: 5 s);
//   - replies: anything but HTTP 200, a transport error, undecodable JSON or a non-empty Error is
//     an error (skipped for an ignorable extender, otherwise the scheduling attempt fails);
//     keys are matched case-insensitively as Go does (a key spelled twice: the last one wins);
//     in node-cache mode NodeNames is read if non-null, else Nodes; both null means every node
//     was filtered out; a returned node that was not in the request is an error;
//     FailedAndUnresolvableNodes wins over FailedNodes;
//   - the interest test: an extender with managedResources sees only pods that name one of
//     them in the requests or limits of a container or init container;
//   - a cycle: in-tree filtering (NodeResourcesFit for extended resources, skipped for
//     resources with ignoredByScheduler: true; a pod's request of a resource is
//     max(sum over app containers, largest init container)), then the extenders' filters in
//     order (ignorable ones last), each on the survivors of the previous; prioritize is skipped
//     when one node is left, otherwise every interested extender's scores are added as
//     Score x weight x 10 (not clamped; errors ignored); the highest total wins, ties at random
//     (seeded); bind through the extender that has bindVerb (an error forgets the assumed pod,
//     unless the pod turns out to be bound already; an ignorable binder falls through to the
//     default binder), else a Binding via the API;
//   - its own cache: pods it assumed count against node allocatable until the API shows them
//     bound, or no longer lists them (deleted or finished).
//   - config validation: weight > 0 with a prioritizeVerb, at most one binder, managed
//     resource names valid extended resource names and unique.
//   - TLS as kube-scheduler's makeTransport sets it up from `enableHTTPS` and `tlsConfig`
//     (client-go's TLSClientConfig): TLS when the urlPrefix says https://; *Data fields win
//     over the *File ones; a client certificate only when both certificate and key are given;
//     `enableHTTPS` without a CA skips verification of the server (as does `insecure`); a CA
//     together with `insecure` is a configuration error; `serverName` is the name checked
//     (and sent as SNI) instead of the URL's host. The TLS transport is kube::Client's
//     (libcurl), which follows client-go's semantics for these same fields.
//   - preemption (DefaultPreemption's PostFilter, when a cycle finds no node): a pod with
//     preemptionPolicy Never, or nominated to a node where a lower-priority pod is still
//     terminating, preempts nothing; the candidates are the nodes refused as Unschedulable (not
//     UnschedulableAndUnresolvable); on each, every pod of lower priority that is not being
//     deleted is removed, the pod must then pass the in-tree filters (extended resources by the
//     node's total), and the removed pods are given back most important first (higher
//     priority, then the earlier start; PodDisruptionBudget-violating ones before the others)
//     while it still passes; then each interested extender with a preemptVerb gets the
//     candidates (UIDs in node-cache mode, whole pods otherwise) and replies with the nodes to
//     keep and their victims (a node without victims, or a UID not on that node, is an error
//     unless the extender is ignorable); the best candidate by pickOneNodeForPreemption's order
//     is chosen, its victims are deleted through the API and the pod's
//     status.nominatedNodeName is set.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/placement/rng.h"
#include "core/status.h"
#include "kube/client.h"

namespace gpushare::fakes {

struct ManagedResource {
  std::string name;
  bool ignored_by_scheduler = false;
};

// An extender entry's `tlsConfig` (PEM bytes in the *Data fields, already base64-decoded).
struct ExtenderTlsConfig {
  bool insecure = false;
  std::string server_name;
  std::string cert_file, key_file, ca_file;
  std::string cert_data, key_data, ca_data;
};

// One entry of KubeSchedulerConfiguration `extenders:`.
struct ExtenderConfig {
  std::string url_prefix;  // "http://127.0.0.1:12345/gpushare-scheduler"
  std::string filter_verb = "filter";
  std::string prioritize_verb = "prioritize";
  std::string bind_verb = "bind";
  std::string preempt_verb;  // empty: not consulted at preemption
  int64_t weight = 1;
  bool node_cache_capable = true;
  std::vector<ManagedResource> managed_resources;
  std::chrono::milliseconds http_timeout{0};  // 0: 5 s
  bool ignorable = false;
  bool enable_https = false;
  std::optional<ExtenderTlsConfig> tls_config;
};

// The scheduler's own checks of the extenders list.
Status ValidateExtenders(const std::vector<ExtenderConfig>& extenders);

// The outcome of one extender's filter.
struct FilterOutcome {
  std::vector<std::string> feasible;                // in the reply's order
  std::map<std::string, std::string> failed;        // Unschedulable
  std::map<std::string, std::string> unresolvable;  // UnschedulableAndUnresolvable
};

// One extender, as kube-scheduler's HTTPExtender talks to it.
class ExtenderClient {
 public:
  explicit ExtenderClient(ExtenderConfig config);

  const ExtenderConfig& config() const { return config_; }
  bool IsInterested(const nlohmann::json& pod) const;
  bool IsBinder() const { return !config_.bind_verb.empty(); }

  // `nodes` are Node objects; in node-cache mode only their names are sent.
  Result<FilterOutcome> Filter(const nlohmann::json& pod,
                               const std::vector<nlohmann::json>& nodes) const;
  // Raw scores by host, as replied.
  Result<std::map<std::string, int64_t>> Prioritize(const nlohmann::json& pod,
                                                    const std::vector<nlohmann::json>& nodes) const;
  Status Bind(const nlohmann::json& pod, const std::string& node) const;
  bool SupportsPreemption() const { return !config_.preempt_verb.empty(); }
  // ProcessPreemption: `victims` are the candidates (node -> victim pods, most important first,
  // and the PDB violations); `pods_on_node` what this scheduler knows on each node. The reply
  // as the candidates kube-scheduler continues with: node -> victim pods, checked as
  // kube-scheduler checks them.
  struct Victims {
    std::vector<nlohmann::json> pods;
    int64_t pdb_violations = 0;
  };
  Result<std::map<std::string, Victims>> ProcessPreemption(
      const nlohmann::json& pod, const std::map<std::string, Victims>& victims,
      const std::map<std::string, std::vector<nlohmann::json>>& pods_on_node) const;

  // The exact request bodies (for tests of the wire format).
  static std::string FilterRequestBody(const nlohmann::json& pod,
                                       const std::vector<nlohmann::json>& nodes,
                                       bool node_cache_capable);
  static std::string BindRequestBody(const nlohmann::json& pod, const std::string& node);

  // POSTs `body` to <urlPrefix>/<verb>; the reply body on HTTP 200, else an error.
  Result<std::string> Post(const std::string& verb, const std::string& body) const;

 private:
  ExtenderConfig config_;
  std::string scheme_host_port_;
  std::string path_prefix_;
  // https:// extenders: the TLS transport, or why it could not be set up.
  std::shared_ptr<kube::Client> tls_client_;
  Status tls_status_;
};

struct SchedulerOptions {
  std::vector<ExtenderConfig> extenders;
  uint64_t seed = 1;  // for ties between equally scored nodes
  // ScheduleAsync: kube-scheduler binds in a goroutine per pod, so binds overlap each other
  // and the next scheduling cycles. At most this many at once here (kube-scheduler has no
  // limit), each started after a random delay of up to `bind_jitter` (goroutine and network
  // timing), so Bindings land in another order than the scheduling cycles ran.
  int max_binds_in_flight = 4;
  std::chrono::microseconds bind_jitter{0};
  bool preemption = true;  // DefaultPreemption's PostFilter after a cycle without a node
};

struct ScheduleResult {
  enum class Kind { kBound, kUnschedulable, kError };
  Kind kind = Kind::kError;
  std::string node;  // kBound
  // kUnschedulable: kube-scheduler's FitError text, "0/N nodes are available: 1 <reason>, ...";
  // kError: the error.
  std::string message;
  std::map<std::string, std::string> node_reasons;  // why each node was refused
  std::set<std::string> unresolvable;               // nodes refused as UnschedulableAndUnresolvable
  std::map<std::string, int64_t> scores;            // total scores (when prioritize ran)
  bool prioritize_called = false;
  // Preemption (kUnschedulable): the node the pod was nominated to and the UIDs deleted there,
  // or why nothing was preempted.
  std::string nominated_node;
  std::vector<std::string> victims;
  std::string preemption_message;

  bool bound() const { return kind == Kind::kBound; }
};

class FakeKubeScheduler {
 public:
  // `api` reads nodes and pods (the scheduler's informers) and creates default Bindings.
  FakeKubeScheduler(std::shared_ptr<kube::Client> api, SchedulerOptions options);

  Status Validate() const { return ValidateExtenders(options_.extenders); }

  ~FakeKubeScheduler();

  // One scheduling cycle for the pod `namespace/name` (read from the API), then its bind.
  ScheduleResult ScheduleOne(const std::string& ns, const std::string& name);
  // The same for a pod object already in hand.
  ScheduleResult Schedule(const nlohmann::json& pod);
  // The scheduling cycle now (the pod is assumed in this scheduler's cache when a node was
  // chosen); the bind on a thread of its own, as kube-scheduler's binding cycle. `done` gets
  // the outcome (from the bind's thread, or at once when no node was chosen). Blocks while
  // max_binds_in_flight binds are running.
  void ScheduleAsync(const nlohmann::json& pod, std::function<void(const ScheduleResult&)> done);
  // Waits for every bind started by ScheduleAsync.
  void WaitBinds();

  // Forgets pods it assumed (as a restarted kube-scheduler would).
  void ForgetAssumed();

 private:
  Result<std::vector<nlohmann::json>> Nodes();
  Result<std::vector<nlohmann::json>> Pods();
  // The scheduling cycle: filters, scores, assumes; kBound here means "node chosen".
  ScheduleResult Cycle(const nlohmann::json& pod);
  // PostFilter: DefaultPreemption for a pod Cycle() found no node for.
  void Preempt(const nlohmann::json& pod, const std::vector<nlohmann::json>& nodes,
               const std::vector<nlohmann::json>& pods, ScheduleResult* res);
  // The in-tree filters this double runs (cordon, NodeResourcesFit for extended resources):
  // "" when `pod` passes on `node` with `pods` there, else the reason.
  std::string InTree(const nlohmann::json& pod, const nlohmann::json& node,
                     const std::vector<const nlohmann::json*>& pods) const;
  // The binding cycle for a pod Cycle() placed.
  ScheduleResult Bind(const nlohmann::json& pod, ScheduleResult chosen);

  std::shared_ptr<kube::Client> api_;
  SchedulerOptions options_;
  std::vector<std::unique_ptr<ExtenderClient>> extenders_;  // ignorable ones last
  std::mutex mu_;
  placement::Rng rng_;
  std::map<std::string, std::pair<std::string, nlohmann::json>> assumed_;  // uid -> (node, pod)
  std::mutex bind_mu_;
  std::condition_variable bind_cv_;
  int binds_in_flight_ = 0;
  std::vector<std::thread> bind_threads_;
};

// A pod's request of `resource` as kube-scheduler computes it: max(sum of app containers,
// largest init container), each container's request defaulting to its limit.
int64_t PodResourceRequest(const nlohmann::json& pod, const std::string& resource);

// Decodes a JSON object key case-insensitively, Go style (the last matching key wins).
const nlohmann::ordered_json* GoField(const nlohmann::ordered_json& obj, const std::string& name);

}  // namespace gpushare::fakes
