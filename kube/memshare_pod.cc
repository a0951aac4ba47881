#include "kube/memshare_pod.h"

#include <string>
#include <vector>

#include "kube/quantity.h"

namespace gpushare::kube {
namespace {

Status Read(const StringMap& m, const std::string& path, std::string_view resource,
            std::optional<int64_t>* out) {
  auto it = m.find(std::string(resource));
  if (it == m.end()) return Status::Ok();
  GPUSHARE_ASSIGN_OR_RETURN(
      int64_t v, ParseWholeQuantity(it->second, path + "[" + std::string(resource) + "]"));
  *out = v;
  return Status::Ok();
}

Status Collect(const std::vector<Container>& list, bool init, std::string_view resource, bool milli,
               std::vector<memshare::ContainerUnits>* out) {
  const std::string field = init ? "spec.initContainers" : "spec.containers";
  for (size_t i = 0; i < list.size(); ++i) {
    const Container& c = list[i];
    memshare::ContainerUnits u;
    u.name = c.name;
    u.init = init;
    const std::string path = field + "[" + std::to_string(i) + "].resources.";
    GPUSHARE_RETURN_IF_ERROR(Read(c.resources.limits, path + "limits", resource, &u.limit));
    GPUSHARE_RETURN_IF_ERROR(Read(c.resources.requests, path + "requests", resource, &u.request));
    GPUSHARE_RETURN_IF_ERROR(
        Read(c.resources.limits, path + "limits", memshare::kCoreResource, &u.core_limit));
    GPUSHARE_RETURN_IF_ERROR(
        Read(c.resources.requests, path + "requests", memshare::kCoreResource, &u.core_request));
    GPUSHARE_RETURN_IF_ERROR(
        Read(c.resources.limits, path + "limits", memshare::kHamiCoreResource, &u.hami_core_limit));
    GPUSHARE_RETURN_IF_ERROR(Read(c.resources.requests, path + "requests",
                                  memshare::kHamiCoreResource, &u.hami_core_request));
    if (milli) {
      GPUSHARE_RETURN_IF_ERROR(
          Read(c.resources.limits, path + "limits", memshare::kMilliResource, &u.milli_limit));
      GPUSHARE_RETURN_IF_ERROR(Read(c.resources.requests, path + "requests",
                                    memshare::kMilliResource, &u.milli_request));
    }
    out->push_back(std::move(u));
  }
  return Status::Ok();
}

Result<memshare::PodRequest> Request(const Pod& pod, std::string_view resource, bool milli) {
  std::vector<memshare::ContainerUnits> units;
  Status s = Collect(pod.spec.init_containers, true, resource, milli, &units);
  if (s.ok()) s = Collect(pod.spec.containers, false, resource, milli, &units);
  Result<memshare::PodRequest> r =
      s.ok() ? memshare::ComputePodRequest(units) : Result<memshare::PodRequest>(s);
  if (!r.ok())
    return r.status().WithContext("pod " + pod.metadata.namespace_ + "/" + pod.metadata.name);
  return r;
}

}  // namespace

Result<memshare::PodRequest> PodMemRequest(const Pod& pod, std::string_view resource) {
  return Request(pod, resource, false);
}

Result<memshare::PodRequest> PodGpuRequest(const Pod& pod, std::string_view resource) {
  return Request(pod, resource, true);
}

Result<memshare::PodRequest> PodPlacementRequest(const Pod& pod, std::string_view resource) {
  GPUSHARE_ASSIGN_OR_RETURN(memshare::PodRequest r, Request(pod, resource, true));
  if (r.empty()) return r;
  Result<GpuSelector> selector = ParseGpuSelector(pod.metadata.annotations);
  if (!selector.ok())
    return selector.status().WithContext("pod " + pod.metadata.namespace_ + "/" +
                                         pod.metadata.name);
  r.selector = std::move(*selector);
  return r;
}

}  // namespace gpushare::kube
