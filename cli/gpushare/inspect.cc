// gpushare inspect [NODE]: who uses which GPU, and how much of it (kube/inspect_view.h), read
// from the API server (kubeconfig, in-cluster service account, --kubeconfig, --context), or from
// a file of API objects (--file: `kubectl get nodes,pods,events -A -o json` saved earlier).
// Output: Alibaba's `kubectl inspect gpushare` table by default, -d per-pod detail,
// -o wide|json|yaml; -w re-prints whenever the output changes (pods, nodes or events watched)
// until SIGINT/SIGTERM. `gpushare inspect region FILE` prints an interposer accounting region
// (inspect_region.cc). Installed as kubectl-gpushare too, so `kubectl gpushare inspect` works.
// docs/inspect.md has the columns, the JSON schema and examples.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "cli/gpushare/api_client.h"
#include "cli/gpushare/command.h"
#include "cli/gpushare/inspect_region.h"
#include "cli/gpushare/inspect_text.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/inspect_view.h"

namespace gpushare::cli {
namespace {

namespace iv = kube::inspect;
namespace text = cli::inspect;

constexpr int kUsage = 2;
constexpr int kFailed = 1;

struct InspectArgs {
  std::string node;
  bool details = false;
  std::string output;  // "", wide, json, yaml
  std::string namespace_;
  bool all_namespaces = false;
  std::string kubeconfig;
  std::string context;
  std::string file;
  bool watch = false;
  std::string region_file;
  bool region = false;
};

// ---- input ------------------------------------------------------------------------------------

struct Source {
  std::shared_ptr<kube::Client> client;
  std::string namespace_;  // "" = all
};

void Warn(const Status& s) {
  std::fprintf(stderr, "gpushare inspect: skipped: %s\n", s.message().c_str());
}

// Lists what the view needs; an object that does not decode is skipped with a warning.
// `pods_version`: the pod list's resourceVersion (a watch starts there).
Result<iv::Input> ListObjects(const Source& s, const InspectArgs& a,
                              const kube::Cancellation* cancel, std::string* pods_version) {
  iv::Input in;
  kube::ListOptions lo;
  lo.limit = 500;
  if (!a.node.empty()) lo.field_selector = "metadata.name=" + a.node;
  GPUSHARE_ASSIGN_OR_RETURN(kube::RawList nodes, s.client->List(kube::kNodes, "", lo, cancel));
  kube::ListOptions po;
  po.limit = 500;
  if (!a.node.empty()) po.field_selector = "spec.nodeName=" + a.node;
  GPUSHARE_ASSIGN_OR_RETURN(kube::RawList pods,
                            s.client->List(kube::kPods, s.namespace_, po, cancel));
  // The items of a List carry no kind of their own.
  for (auto& j : nodes.items) {
    j["kind"] = "Node";
    if (Status st = iv::AddObjects(j, &in, "node"); !st.ok()) Warn(st);
  }
  bool pending = false;
  for (auto& j : pods.items) {
    j["kind"] = "Pod";
    if (Status st = iv::AddObjects(j, &in, "pod"); !st.ok()) Warn(st);
    if (!in.pods.empty() && in.pods.back().spec.node_name.empty()) pending = true;
  }
  // Events only matter for pending pods: the reasons they were not placed.
  if (pending && a.node.empty()) {
    kube::ListOptions eo;
    eo.limit = 500;
    eo.field_selector = "involvedObject.kind=Pod";
    Result<kube::RawList> events = s.client->List(kube::kEvents, s.namespace_, eo, cancel);
    if (events.ok()) {
      for (auto& j : events->items) {
        j["kind"] = "Event";
        if (Status st = iv::AddObjects(j, &in, "event"); !st.ok()) Warn(st);
      }
    } else {
      std::fprintf(stderr, "gpushare inspect: events not listed (%s); reasons from conditions\n",
                   events.status().message().c_str());
    }
  }
  if (pods_version != nullptr) *pods_version = pods.resource_version;
  return in;
}

std::string Render(const iv::Input& in, const InspectArgs& a, const std::string& ns) {
  iv::Filter f;
  f.node = a.node;
  f.namespace_ = ns;
  iv::View v = iv::Build(in, f);
  if (a.output == "json") return iv::ToJson(v).dump(2) + "\n";
  if (a.output == "yaml") return text::ToYaml(iv::ToJson(v));
  if (a.output == "wide") return text::Wide(v);
  return a.details ? text::Detail(v) : text::Table(v);
}

// ---- watch ------------------------------------------------------------------------------------

// Stops the watch on SIGINT/SIGTERM: the signals are blocked and a thread waits for them.
class SignalStop {
 public:
  explicit SignalStop(kube::Cancellation* cancel) : cancel_(cancel) {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGUSR1);  // our own wake-up at the end
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this] {
      int sig = 0;
      sigwait(&set_, &sig);
      if (sig != SIGUSR1) signalled_ = true;
      cancel_->Cancel();
    });
  }
  ~SignalStop() {
    pthread_kill(thread_.native_handle(), SIGUSR1);
    thread_.join();
  }
  bool signalled() const { return signalled_; }

 private:
  kube::Cancellation* cancel_;
  sigset_t set_;
  std::atomic<bool> signalled_{false};
  std::thread thread_;
};

int Watch(const Source& s, const InspectArgs& a) {
  kube::Cancellation cancel;
  SignalStop stop(&cancel);
  std::string last;
  int failures = 0;
  while (!cancel.cancelled()) {
    std::string version;
    Result<iv::Input> in = ListObjects(s, a, &cancel, &version);
    if (cancel.cancelled()) break;
    if (!in.ok()) {
      std::fprintf(stderr, "gpushare inspect: %s\n", in.status().message().c_str());
      if (++failures >= 5) return kFailed;
      cancel.SleepFor(std::chrono::seconds(2));
      continue;
    }
    failures = 0;
    std::string out = Render(*in, a, s.namespace_);
    if (out != last) {
      if (!last.empty() && a.output != "json" && a.output != "yaml") std::fputs("\n", stdout);
      if (!last.empty() && a.output == "yaml") std::fputs("---\n", stdout);
      std::fputs(out.c_str(), stdout);
      std::fflush(stdout);
      last = std::move(out);
    }
    // Until something changes: a watch on pods (the objects that change most), bounded by its
    // timeout and by a re-list every 60 s (nodes and events change too).
    kube::WatchOptions wo;
    wo.timeout_seconds = 60;
    wo.allow_bookmarks = false;
    wo.resource_version = version;
    if (!a.node.empty()) wo.field_selector = "spec.nodeName=" + a.node;
    bool changed = false;
    (void)s.client->Watch(
        kube::kPods, s.namespace_, wo,
        [&changed](kube::WatchEvent&&) {
          changed = true;  // any event (an ERROR too: the version expired) means re-list
          return false;
        },
        &cancel);
    if (!changed) cancel.SleepFor(std::chrono::seconds(1));  // the stream ended: pace re-lists
    cancel.SleepFor(std::chrono::milliseconds(500));         // coalesce a burst of changes
  }
  return 0;
}

// ---- main -------------------------------------------------------------------------------------

int RunInspect(const InspectArgs& a) {
  if (a.region) return RunInspectRegion(a.region_file);
  if (!a.output.empty() && a.details && a.output != "wide") {
    std::fprintf(stderr, "gpushare inspect: -d prints text; it cannot be combined with -o %s\n",
                 a.output.c_str());
    return kUsage;
  }
  std::string ns = a.all_namespaces ? "" : a.namespace_;
  if (!a.file.empty()) {
    Result<iv::Input> in = text::ReadObjectsFile(a.file);
    if (!in.ok()) {
      std::fprintf(stderr, "gpushare inspect: %s\n", in.status().message().c_str());
      return kUsage;
    }
    std::fputs(Render(*in, a, ns).c_str(), stdout);
    return 0;
  }
  kube::ClientOptions co;
  co.user_agent = "gpushare-inspect";
  co.request_timeout = std::chrono::milliseconds(30000);
  std::optional<cli::ApiClient> api = cli::ConnectApi("inspect", a.kubeconfig, a.context, co);
  if (!api) return kUsage;
  const kube::ClientConfig* cfg = &api->config;
  std::shared_ptr<kube::Client> client = api->client;
  Source s{client, ns};
  if (a.watch) return Watch(s, a);
  Result<iv::Input> in = ListObjects(s, a, nullptr, nullptr);
  if (!in.ok()) {
    std::fprintf(stderr, "gpushare inspect: %s (server %s)\n", in.status().message().c_str(),
                 cfg->server.c_str());
    return kFailed;
  }
  std::fputs(Render(*in, a, ns).c_str(), stdout);
  return 0;
}

GPUSHARE_COMMAND(
    "inspect", "show who uses which GPU and how much of it (from the Kubernetes API)",
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<InspectArgs>();
      app.add_option("node", args->node, "only this node");
      app.add_option("--node", args->node, "only this node");
      app.add_flag("-d,--details", args->details, "per-pod detail for each node");
      app.add_option("-o,--output", args->output, "wide, json or yaml")
          ->check(CLI::IsMember({"wide", "json", "yaml"}));
      app.add_option("-n,--namespace", args->namespace_,
                     "only pods of this namespace count (default: every namespace)");
      app.add_flag("-A,--all-namespaces", args->all_namespaces,
                   "pods of every namespace (the default; overrides -n)");
      app.add_option("--kubeconfig", args->kubeconfig,
                     "kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
      app.add_option("--context", args->context, "kubeconfig context (default: current-context)");
      app.add_option("-f,--file", args->file,
                     "read the API objects from this file (JSON or YAML, e.g. `kubectl get "
                     "nodes,pods,events -A -o json`) instead of the API server");
      app.add_flag("-w,--watch", args->watch,
                   "print again whenever the output changes, until interrupted");
      CLI::App* region = app.add_subcommand(
          "region", "print an interposer accounting region file (read-only, never locked)");
      region
          ->add_option("file", args->region_file,
                       "the region file: /var/lib/gpushare/region in a container, "
                       "<stateDir>/<id>/shared/region on the node")
          ->required();
      region->callback([args] { args->region = true; });
      return [args]() { return RunInspect(*args); };
    });

}  // namespace
}  // namespace gpushare::cli
