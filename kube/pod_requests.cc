#include "kube/pod_requests.h"

#include <algorithm>

#include "kube/quantity.h"

namespace gpushare::kube {

namespace {

// The container's request of `resource`, or its limit when it has no request.
const std::string* Asked(const Container& c, const std::string& resource) {
  auto r = c.resources.requests.find(resource);
  if (r != c.resources.requests.end()) return &r->second;
  auto l = c.resources.limits.find(resource);
  return l == c.resources.limits.end() ? nullptr : &l->second;
}

CpuMemory Of(const Container& c) {
  CpuMemory out;
  if (const std::string* cpu = Asked(c, "cpu")) {
    Result<Quantity> q = Quantity::Parse(*cpu);
    if (q.ok() && !q->IsNegative()) out.cpu_milli = q->MilliValue();
  }
  if (const std::string* mem = Asked(c, "memory")) {
    Result<Quantity> q = Quantity::Parse(*mem);
    if (q.ok() && !q->IsNegative()) out.memory_bytes = q->Value();
  }
  return out;
}

}  // namespace

CpuMemory PodCpuMemoryRequests(const Pod& pod) {
  CpuMemory sum;
  for (const Container& c : pod.spec.containers) {
    const CpuMemory r = Of(c);
    sum.cpu_milli += r.cpu_milli;
    sum.memory_bytes += r.memory_bytes;
  }
  for (const Container& c : pod.spec.init_containers) {
    const CpuMemory r = Of(c);
    sum.cpu_milli = std::max(sum.cpu_milli, r.cpu_milli);
    sum.memory_bytes = std::max(sum.memory_bytes, r.memory_bytes);
  }
  return sum;
}

CpuMemory NodeAllocatable(const Node& node) {
  CpuMemory out;
  const auto& a = node.status.allocatable;
  if (auto it = a.find("cpu"); it != a.end()) {
    Result<Quantity> q = Quantity::Parse(it->second);
    if (q.ok() && !q->IsNegative()) out.cpu_milli = q->MilliValue();
  }
  if (auto it = a.find("memory"); it != a.end()) {
    Result<Quantity> q = Quantity::Parse(it->second);
    if (q.ok() && !q->IsNegative()) out.memory_bytes = q->Value();
  }
  return out;
}

}  // namespace gpushare::kube
