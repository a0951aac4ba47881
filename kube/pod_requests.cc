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

// CPU (milli) and memory (bytes) from their quantities; absent, unreadable or negative: 0.
CpuMemory Read(const std::string* cpu, const std::string* memory) {
  CpuMemory out;
  if (cpu != nullptr) {
    Result<Quantity> q = Quantity::Parse(*cpu);
    if (q.ok() && !q->IsNegative()) out.cpu_milli = q->MilliValue();
  }
  if (memory != nullptr) {
    Result<Quantity> q = Quantity::Parse(*memory);
    if (q.ok() && !q->IsNegative()) out.memory_bytes = q->Value();
  }
  return out;
}

CpuMemory Of(const Container& c) {
  return Read(Asked(c, "cpu"), Asked(c, "memory"));
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
  const auto& a = node.status.allocatable;
  const auto cpu = a.find("cpu");
  const auto memory = a.find("memory");
  return Read(cpu == a.end() ? nullptr : &cpu->second,
              memory == a.end() ? nullptr : &memory->second);
}

}  // namespace gpushare::kube
