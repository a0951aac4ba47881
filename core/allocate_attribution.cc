// See allocate_attribution.h.
#include "core/allocate_attribution.h"

namespace gpushare::attribution {
namespace {

// Pending, or already failed by kubelet for this refusal.
bool InAdmission(const RefusedAllocate& refused, const PodCandidate& pod) {
  if (pod.phase.empty() || pod.phase == "Pending") return true;
  return pod.phase == "Failed" && pod.status_reason == kUnexpectedAdmissionError &&
         !refused.grpc_message.empty() &&
         pod.status_message.find(refused.grpc_message) != std::string::npos;
}

// gpushare.io/allocations says the container holds devices of the resource.
bool Holds(const PodCandidate& pod, const std::string& container, const std::string& resource) {
  if (!pod.record) return false;
  for (const alloc::ContainerRecord& c : pod.record->containers) {
    if (c.name == container && c.resource == resource && !c.devices.empty()) return true;
  }
  return false;
}

}  // namespace

std::vector<PodMatch> MatchRefusedAllocate(const RefusedAllocate& refused,
                                           const std::vector<PodCandidate>& pods) {
  std::vector<PodMatch> out;
  if (refused.device_count == 0) return out;
  const int64_t want = static_cast<int64_t>(refused.device_count);
  for (size_t i = 0; i < pods.size(); ++i) {
    const PodCandidate& p = pods[i];
    if (p.node_name != refused.node || p.terminating || !InAdmission(refused, p)) continue;
    PodMatch m;
    m.pod = i;
    for (const ContainerAsk& c : p.containers) {
      if (c.count == want && !Holds(p, c.name, refused.resource)) m.containers.push_back(c.name);
    }
    if (!m.containers.empty()) out.push_back(std::move(m));
  }
  return out;
}

}  // namespace gpushare::attribution
