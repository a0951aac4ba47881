// AllocateAttribution: which pod a refused Allocate was for.
//
// Kubelet's AllocateRequest names devices, never the pod. But kubelet calls Allocate only while
// it admits a pod already bound to its node (spec.nodeName), one container at a time, with
// exactly as many device IDs as that container's limit (else request) of the resource (for
// aliyun.com/gpu-mem one ID per memory unit, core/memshare.h). So the pods a refusal can be for
// are those that
//   - are bound to the node and not being deleted;
//   - are Pending (or have no phase yet), or were already failed by kubelet for this very
//     refusal (phase Failed, reason UnexpectedAdmissionError, the refusal's gRPC message in
//     status.message: kubelet may write that before the pod is looked up);
//   - have an app or init container whose count of the resource equals the number of refused
//     device IDs, and that container does not hold devices of the resource yet according to
//     gpushare.io/allocations (core/allocation_record.h): kubelet does not ask again for a
//     container it admitted.
// gpushare-node (node/allocate_events.h) puts the refusal's Event on the pod when exactly one
// pod matches, and on the Node, naming the candidates, otherwise.
//
// Pure (no I/O): the caller lists the pods and turns them into PodCandidates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/allocation_record.h"

namespace gpushare::attribution {

// The status.reason kubelet gives a pod whose admission failed in a device plugin's Allocate.
inline constexpr std::string_view kUnexpectedAdmissionError = "UnexpectedAdmissionError";

// One container of a candidate pod and what it asks of the refused resource.
struct ContainerAsk {
  std::string name;
  int64_t count = 0;  // limit, else request, of the resource; 0 when absent or malformed
};

// A pod of the node, as far as attribution cares.
struct PodCandidate {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string node_name;                          // spec.nodeName
  std::string phase;                              // status.phase ("" when not set yet)
  std::string status_reason;                      // status.reason
  std::string status_message;                     // status.message
  bool terminating = false;                       // metadata.deletionTimestamp is set
  std::vector<ContainerAsk> containers;           // init and app containers, in spec order
  std::optional<alloc::AllocationRecord> record;  // gpushare.io/allocations, when decodable
};

// What was refused.
struct RefusedAllocate {
  std::string node;
  std::string resource;
  size_t device_count = 0;   // device IDs in the refused container request
  std::string grpc_message;  // the message of the gRPC status sent to kubelet ("" = unknown)
};

// A pod the refusal may be for.
struct PodMatch {
  size_t pod = 0;                       // index into the candidates
  std::vector<std::string> containers;  // its containers that fit, in the candidates' order
};

// The candidates (in their order) that the refusal may be for, each with the containers that fit.
// None when device_count is 0.
std::vector<PodMatch> MatchRefusedAllocate(const RefusedAllocate& refused,
                                           const std::vector<PodCandidate>& pods);

}  // namespace gpushare::attribution
