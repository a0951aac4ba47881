// The scheduler cache (scheduler/cache.h) as data (tests/testdata/scheduler_cache/*.txt,
// docs/testing.md): nodes and pods in as the informers would see them, the cache's verdicts,
// bookings and GPU use out. One cache per file, fed by its commands in order. Commands:
//   node NAME gpus=U,U,... [models=M,M,...] [modes=memory,time-slicing,...] [unhealthy=I,...]
//        [max-clients=N]
//       a node with those GPUs (units each, GiB) and its inventory annotation; again: an update.
//   pod NAME [containers=main:3,side:2] [init=setup:4] [milli=M] [annotation=K=V ...]
//       a Pending pod (default: one container "main" asking 3 units), shown to the cache.
//   bound NAME node=N gpus=main:0,side:1 [confirmed] [assume=NS]
//       pod NAME as the API shows it after a bind on N (the annotations a bind writes; confirmed:
//       also gpushare-node's), shown to the cache.
//   delete NAME
//       the pod is gone.
//   filter NAME nodes=A,B,...
//       one line per node: "fits", or the kind (failed, unresolvable), the code and the reason.
//   score NAME nodes=A,B,...
//       "A=10 B=0 ...".
//   reserve NAME node=N [now=NS] [commit|rollback]
//       a bind's booking: the GPUs of its containers, or "error:" with the code and message.
//   expire now=NS timeout=NS
//       the pods released by the assume timeout.
//   gpus [node=N]
//       every node's GPUs (or one node's): "N: i:used/capacity(clients)" with "!" when unusable.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "base/strings.h"
#include "core/memshare.h"
#include "kube/memshare_pod.h"
#include "scheduler/cache.h"
#include "tests/datadriven.h"
#include "tests/scheduler/fixtures.h"

namespace gpushare::scheduler {
namespace {

using datadriven::Case;
using namespace testing;
namespace ms = memshare;

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

// "main:3,side:2" -> {main: 3, side: 2}, in order.
std::vector<std::pair<std::string, int64_t>> Pairs(const std::string& s) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const std::string& item : Split(s)) {
    const size_t colon = item.find(':');
    out.emplace_back(item.substr(0, colon), std::stoll(item.substr(colon + 1)));
  }
  return out;
}

std::string KindName(NodeVerdict::Kind k) {
  switch (k) {
    case NodeVerdict::Kind::kFits:
      return "fits";
    case NodeVerdict::Kind::kFailed:
      return "failed";
    case NodeVerdict::Kind::kUnresolvable:
      return "unresolvable";
  }
  return "?";
}

class CacheData {
 public:
  CacheData() : cache_(SyncedCache(&log_)) {}

  std::string Run(const Case& c) {
    if (c.command == "node") return RunNode(c);
    if (c.command == "pod") return RunPod(c);
    if (c.command == "bound") return RunBound(c);
    if (c.command == "delete") return RunDelete(c);
    if (c.command == "filter") return RunFilter(c);
    if (c.command == "score") return RunScore(c);
    if (c.command == "reserve") return RunReserve(c);
    if (c.command == "expire") return RunExpire(c);
    if (c.command == "gpus") return RunGpus(c);
    return "unknown command \"" + c.command +
           "\" (node, pod, bound, delete, filter, score, reserve, expire, gpus)\n";
  }

 private:
  static std::string Arg(const Case& c, const std::string& key) {
    std::optional<std::string> v = c.Value(key);
    if (!v) ADD_FAILURE() << c.Where() << ": needs " << key << "=";
    return v.value_or("");
  }
  static std::string Name(const Case& c) {
    for (const auto& a : c.args)
      if (a.value.empty()) return a.key;
    ADD_FAILURE() << c.Where() << ": needs a name";
    return "";
  }

  std::string RunNode(const Case& c) {
    std::vector<GpuSpec> gpus;
    for (const std::string& u : Split(Arg(c, "gpus"))) gpus.push_back(GpuSpec{std::stoll(u)});
    if (auto models = c.Value("models")) {
      std::vector<std::string> m = Split(*models);
      for (size_t i = 0; i < gpus.size() && i < m.size(); ++i) gpus[i].model = m[i];
    }
    if (auto modes = c.Value("modes")) {
      std::vector<std::string> m = Split(*modes);
      for (size_t i = 0; i < gpus.size() && i < m.size(); ++i) gpus[i].mode = m[i];
    }
    if (auto bad = c.Value("unhealthy")) {
      for (const std::string& i : Split(*bad)) gpus.at(std::stoul(i)).healthy = false;
    }
    const int max_clients = std::stoi(c.Value("max-clients").value_or("48"));
    cache_->UpsertNode(DecodeNodeOrDie(NodeJson(Name(c), gpus, max_clients)));
    return "";
  }

  std::string RunPod(const Case& c) {
    const std::string name = Name(c);
    std::vector<ContainerSpec> containers;
    for (const auto& [n, u] : Pairs(c.Value("containers").value_or("main:3")))
      containers.push_back({n, u});
    if (auto init = c.Value("init")) {
      for (const auto& [n, u] : Pairs(*init)) containers.push_back({n, u, true});
    }
    json pod = PodJson(name, containers, "default", "uid-" + name);
    if (auto milli = c.Value("milli")) pod = MilliPod(name, std::stoll(*milli));
    for (const std::string& a : c.Values("annotation")) {
      const size_t eq = a.find('=');
      pod["metadata"]["annotations"][a.substr(0, eq)] = a.substr(eq + 1);
    }
    pods_[name] = pod;
    cache_->UpsertPod(DecodePodOrDie(pod));
    return "";
  }

  std::string RunBound(const Case& c) {
    const std::string name = Name(c);
    json pod = pods_.at(name);
    pod["spec"]["nodeName"] = Arg(c, "node");
    ms::ContainerGpus gpus;
    for (const auto& [n, g] : Pairs(Arg(c, "gpus"))) gpus[n] = static_cast<int>(g);
    const ms::PodRequest req = Req(pod);
    std::vector<int> demand;
    for (const std::string& d : req.DemandContainers()) demand.push_back(gpus.at(d));
    const int64_t assume = std::stoll(c.Value("assume").value_or("1"));
    auto a = ms::BindAnnotations(req, demand, 24, assume);
    if (c.Has("confirmed"))
      for (const auto& [k, v] : ms::ConfirmAnnotations(req, gpus)) a[k] = v;
    for (const auto& [k, v] : a) pod["metadata"]["annotations"][k] = v;
    pods_[name] = pod;
    cache_->UpsertPod(DecodePodOrDie(pod));
    return "";
  }

  std::string RunDelete(const Case& c) {
    const std::string name = Name(c);
    cache_->DeletePod(DecodePodOrDie(pods_.at(name)));
    pods_.erase(name);
    return "";
  }

  std::vector<std::string_view> Nodes(const Case& c, std::vector<std::string>* names) {
    *names = Split(Arg(c, "nodes"));
    return {names->begin(), names->end()};
  }

  std::string RunFilter(const Case& c) {
    std::vector<std::string> names;
    const std::vector<std::string_view> nodes = Nodes(c, &names);
    const std::vector<NodeVerdict> v = cache_->Filter(Req(pods_.at(Name(c))), nodes);
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) {
      out += names[i] + ": " + KindName(v[i].kind);
      if (!v[i].code.empty()) out += " " + std::string(v[i].code);
      if (!v[i].reason.empty()) out += ": " + v[i].reason;
      out += "\n";
    }
    return out;
  }

  std::string RunScore(const Case& c) {
    std::vector<std::string> names;
    const std::vector<std::string_view> nodes = Nodes(c, &names);
    const std::vector<int64_t> s = cache_->Score(Req(pods_.at(Name(c))), nodes);
    std::string out;
    for (size_t i = 0; i < s.size(); ++i)
      out += (i ? " " : "") + names[i] + "=" + std::to_string(s[i]);
    return out + "\n";
  }

  std::string RunReserve(const Case& c) {
    const std::string name = Name(c);
    const kube::Pod pod = DecodePodOrDie(pods_.at(name));
    Result<Reservation> r = cache_->Reserve(pod, Req(pods_.at(name)), Arg(c, "node"),
                                            std::stoll(c.Value("now").value_or("1")));
    if (!r.ok())
      return "error: " + std::string(r.status().reason()) + ": " + r.status().message() + "\n";
    std::string out = r->already ? "already booked:" : "booked:";
    for (const auto& [container, gpu] : r->containers)
      out += " " + container + "=" + std::to_string(gpu);
    if (c.Has("commit")) {
      cache_->Commit(pod.metadata.uid, r->token);
      out += " (committed)";
    } else if (c.Has("rollback")) {
      cache_->Rollback(pod.metadata.uid, r->token);
      out += " (rolled back)";
    }
    return out + "\n";
  }

  std::string RunExpire(const Case& c) {
    std::string out;
    for (const ExpiredPod& e :
         cache_->ExpireAssumed(std::stoll(Arg(c, "now")), std::stoll(Arg(c, "timeout")))) {
      out += "expired " + e.key + " on " + e.node + ": " + std::to_string(e.units) + " units\n";
    }
    return out.empty() ? "nothing expired\n" : out;
  }

  std::string RunGpus(const Case& c) {
    std::string out;
    for (const InspectNode& n : cache_->Inspect()) {
      if (c.Has("node") && n.name != *c.Value("node")) continue;
      out += n.name + ":";
      for (const GpuState& g : cache_->NodeGpus(n.name)) {
        out += " " + std::to_string(g.index) + ":" + std::to_string(g.used) + "/" +
               std::to_string(g.capacity) + "(" + std::to_string(g.clients) + ")" +
               (g.usable ? "" : "!");
      }
      out += "\n";
    }
    return out;
  }

  std::string log_;
  std::unique_ptr<GpuCache> cache_;
  std::map<std::string, json> pods_;
};

const std::string kDataDir = std::string(GPUSHARE_SOURCE_DIR) + "/tests/testdata/scheduler_cache";

class SchedulerCache : public ::testing::TestWithParam<std::string> {};

TEST_P(SchedulerCache, File) {
  CacheData data;
  const int n = datadriven::RunDataFile(GetParam(), [&](const Case& c) { return data.Run(c); });
  EXPECT_GT(n, 0) << GetParam() << " has no cases";
}

INSTANTIATE_TEST_SUITE_P(Testdata, SchedulerCache,
                         ::testing::ValuesIn(datadriven::DataFiles(kDataDir)),
                         datadriven::FileParamName);

}  // namespace
}  // namespace gpushare::scheduler
