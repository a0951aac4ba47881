// Client's typed calls: see client.h. The decoded objects of kube/objects.h over the REST verbs.
#include "kube/client.h"

namespace gpushare::kube {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Typed calls

namespace {

template <typename T, typename Decoder>
Result<T> DecodeResult(Result<json> j, Decoder decode) {
  if (!j.ok()) return j.status();
  return decode(*j);
}

template <typename T, typename Decoder>
Result<std::vector<T>> DecodeItems(Result<RawList> list, Decoder decode) {
  if (!list.ok()) return list.status();
  std::vector<T> out;
  out.reserve(list->items.size());
  for (const json& item : list->items) {
    GPUSHARE_ASSIGN_OR_RETURN(T v, decode(item));
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace

Result<Pod> Client::GetPod(std::string_view ns, std::string_view name) {
  return DecodeResult<Pod>(Get(kPods, ns, name), DecodePod);
}

Result<Node> Client::GetNode(std::string_view name) {
  return DecodeResult<Node>(Get(kNodes, "", name), DecodeNode);
}

Result<std::vector<Pod>> Client::ListPods(std::string_view ns, const ListOptions& options) {
  return DecodeItems<Pod>(List(kPods, ns, options), DecodePod);
}

Result<std::vector<Node>> Client::ListNodes(const ListOptions& options) {
  return DecodeItems<Node>(List(kNodes, "", options), DecodeNode);
}

Result<Pod> Client::PatchPodAnnotations(std::string_view ns, std::string_view name,
                                        const AnnotationChanges& changes,
                                        const PatchOptions& options) {
  return DecodeResult<Pod>(MergePatch(kPods, ns, name, AnnotationsPatch(changes), options),
                           DecodePod);
}

Result<Pod> Client::PatchPodStatus(std::string_view ns, std::string_view name,
                                   const json& status_patch, const PatchOptions& options) {
  PatchOptions o = options;
  o.subresource = "status";
  return DecodeResult<Pod>(MergePatch(kPods, ns, name, json{{"status", status_patch}}, o),
                           DecodePod);
}

Result<Node> Client::PatchNodeAnnotations(std::string_view name, const AnnotationChanges& changes,
                                          const PatchOptions& options) {
  return DecodeResult<Node>(MergePatch(kNodes, "", name, AnnotationsPatch(changes), options),
                            DecodeNode);
}

Result<Node> Client::PatchNodeStatus(std::string_view name, const json& status_patch,
                                     const PatchOptions& options) {
  PatchOptions o = options;
  o.subresource = "status";
  return DecodeResult<Node>(MergePatch(kNodes, "", name, json{{"status", status_patch}}, o),
                            DecodeNode);
}

Status Client::Bind(const Binding& b) {
  if (b.pod_name.empty() || b.pod_namespace.empty() || b.node_name.empty()) {
    return Status::InvalidArgument("bind: pod name, namespace and node name are required");
  }
  Result<json> j = JsonCall({"POST", ResourcePath(kPods, b.pod_namespace, b.pod_name, "binding"),
                             EncodeBinding(b).dump(), "application/json"});
  return j.status();
}

Result<Event> Client::CreateEvent(const Event& e) {
  if (e.metadata.namespace_.empty()) return Status::InvalidArgument("event: namespace is required");
  return DecodeResult<Event>(Create(kEvents, e.metadata.namespace_, EncodeEvent(e)), DecodeEvent);
}

}  // namespace gpushare::kube
