// core/allocate_attribution.h: which pods a refused Allocate can be for, as a table: bound to
// the node, in admission (Pending, or failed by kubelet for this refusal), not terminating, with
// a container asking exactly the refused device count that holds no devices yet.
#include "core/allocate_attribution.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpushare::attribution {
namespace {

constexpr const char* kMem = "aliyun.com/gpu-mem";
constexpr const char* kMsg = "GpuUnhealthy: resource aliyun.com/gpu-mem: devices are Unhealthy: x";

RefusedAllocate Refusal(size_t count) {
  return RefusedAllocate{"n1", kMem, count, kMsg};
}

// A Pending pod on n1 with one app container asking `count` units.
PodCandidate Pod(std::string name, int64_t count) {
  PodCandidate p;
  p.namespace_ = "ns";
  p.name = std::move(name);
  p.uid = "uid-" + p.name;
  p.node_name = "n1";
  p.phase = "Pending";
  p.containers = {{"main", count}};
  return p;
}

alloc::AllocationRecord Holding(const std::string& container, const std::string& resource) {
  alloc::AllocationRecord r;
  r.node = "n1";
  alloc::ContainerRecord c;
  c.name = container;
  c.resource = resource;
  c.devices.push_back(alloc::DeviceRecord{});
  r.containers.push_back(c);
  return r;
}

struct Case {
  const char* name;
  std::vector<PodCandidate> pods;
  size_t count;
  // "pod:container,container" per match, in order.
  std::vector<std::string> want;
};

std::vector<std::string> Describe(const std::vector<PodCandidate>& pods,
                                  const std::vector<PodMatch>& got) {
  std::vector<std::string> out;
  for (const PodMatch& m : got) {
    std::string s = pods.at(m.pod).name + ":";
    for (size_t i = 0; i < m.containers.size(); ++i) s += (i ? "," : "") + m.containers[i];
    out.push_back(s);
  }
  return out;
}

std::vector<Case> Cases() {
  std::vector<Case> cs;
  cs.push_back({"one pending pod asking exactly the count", {Pod("a", 4)}, 4, {"a:main"}});
  cs.push_back({"count differs", {Pod("a", 3)}, 4, {}});
  cs.push_back({"zero devices refused matches nothing", {Pod("a", 0)}, 0, {}});
  {
    PodCandidate other = Pod("a", 4);
    other.node_name = "n2";
    cs.push_back({"bound to another node", {other}, 4, {}});
  }
  {
    PodCandidate unbound = Pod("a", 4);
    unbound.node_name = "";
    cs.push_back({"not bound", {unbound}, 4, {}});
  }
  {
    PodCandidate running = Pod("a", 4);
    running.phase = "Running";
    cs.push_back({"running pods were admitted", {running}, 4, {}});
  }
  {
    PodCandidate succeeded = Pod("a", 4);
    succeeded.phase = "Succeeded";
    cs.push_back({"finished pods are not admitted again", {succeeded}, 4, {}});
  }
  {
    PodCandidate nophase = Pod("a", 4);
    nophase.phase = "";
    cs.push_back({"no phase yet counts as pending", {nophase}, 4, {"a:main"}});
  }
  {
    PodCandidate gone = Pod("a", 4);
    gone.terminating = true;
    cs.push_back({"terminating", {gone}, 4, {}});
  }
  {
    PodCandidate failed = Pod("a", 4);
    failed.phase = "Failed";
    failed.status_reason = "UnexpectedAdmissionError";
    failed.status_message = std::string(
                                "Pod was rejected: Allocate failed due to rpc error: code = "
                                "FailedPrecondition desc = ") +
                            kMsg + ", which is unexpected";
    cs.push_back({"failed by kubelet for this refusal", {failed}, 4, {"a:main"}});
    PodCandidate older = failed;
    older.name = "b";
    older.status_message = "Pod was rejected: Allocate failed due to something else";
    cs.push_back({"failed by kubelet for another refusal", {older}, 4, {}});
    PodCandidate evicted = failed;
    evicted.name = "c";
    evicted.status_reason = "Evicted";
    cs.push_back({"failed for another reason", {evicted}, 4, {}});
  }
  {
    PodCandidate init = Pod("a", 0);
    init.containers = {{"setup", 2}, {"main", 4}, {"sidecar", 0}};
    cs.push_back({"an init container may be the one", {init}, 2, {"a:setup"}});
    PodCandidate twins = Pod("b", 0);
    twins.containers = {{"left", 1}, {"right", 1}};
    cs.push_back({"two containers of one pod are one candidate", {twins}, 1, {"b:left,right"}});
  }
  {
    PodCandidate held = Pod("a", 4);
    held.record = Holding("main", kMem);
    cs.push_back({"the container already holds units", {held}, 4, {}});
    PodCandidate other_resource = Pod("b", 4);
    other_resource.record = Holding("main", "nvidia.com/gpu");
    cs.push_back({"holding another resource does not count", {other_resource}, 4, {"b:main"}});
    PodCandidate half = Pod("c", 0);
    half.containers = {{"first", 2}, {"second", 2}};
    half.record = Holding("first", kMem);
    cs.push_back({"the next container of a half-admitted pod", {half}, 2, {"c:second"}});
    PodCandidate empty = Pod("d", 4);
    empty.record = Holding("main", kMem);
    empty.record->containers[0].devices.clear();
    cs.push_back({"a record without devices holds nothing", {empty}, 4, {"d:main"}});
  }
  cs.push_back({"several pods: ambiguous, in order",
                {Pod("a", 4), Pod("b", 2), Pod("c", 4)},
                4,
                {"a:main", "c:main"}});
  cs.push_back({"no pod at all", {}, 4, {}});
  return cs;
}

TEST(MatchRefusedAllocate, Table) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(Describe(c.pods, MatchRefusedAllocate(Refusal(c.count), c.pods)), c.want);
  }
}

TEST(MatchRefusedAllocate, FailedPodNeedsTheMessage) {
  PodCandidate failed = Pod("a", 1);
  failed.phase = "Failed";
  failed.status_reason = std::string(kUnexpectedAdmissionError);
  failed.status_message = "anything";
  RefusedAllocate r = Refusal(1);
  r.grpc_message = "";  // unknown: a failed pod is never taken for it
  EXPECT_TRUE(MatchRefusedAllocate(r, {failed}).empty());
}

}  // namespace
}  // namespace gpushare::attribution
