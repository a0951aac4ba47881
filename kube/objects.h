// Typed views of the Kubernetes objects gpushare reads and writes: Pod, Node, Binding, Event and
// the API's Status object.
//
// Each view holds only the fields gpushare uses, decoded from the API's JSON. Decoding is
// tolerant where the API is (a missing or null field is the zero value: empty string, empty
// map, empty list) and strict where input could be hostile (a field of the wrong JSON type is
// an error naming its path, e.g. `pod.spec.containers[1].resources.limits: expected object,
// got array`). Quantities stay strings here (parse them with kube/quantity.h); a JSON number
// in a quantity map is accepted and kept as its decimal spelling, as the API server does.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpushare::kube {

using StringMap = std::map<std::string, std::string>;

struct OwnerReference {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string uid;
  bool controller = false;
};

struct ObjectMeta {
  std::string name;
  std::string namespace_;  // empty for cluster-scoped objects (nodes)
  std::string uid;
  std::string resource_version;
  std::string generate_name;
  std::string creation_timestamp;                 // RFC 3339, as sent
  std::optional<std::string> deletion_timestamp;  // set once deletion has started
  StringMap labels;
  StringMap annotations;
  std::vector<OwnerReference> owner_references;
};

struct ResourceRequirements {
  StringMap requests;  // resource name -> quantity string
  StringMap limits;
};

struct Container {
  std::string name;
  std::string image;
  ResourceRequirements resources;
};

struct PodSpec {
  std::string node_name;
  std::string scheduler_name;
  int32_t priority = 0;  // spec.priority, resolved from the PriorityClass at admission (0 absent)
  // The pod states a soft placement preference that kube-scheduler's score plugins weigh: a
  // preferred node affinity, a preferred pod affinity or anti-affinity, or a topology spread
  // constraint with whenUnsatisfiable ScheduleAnyway (--filter-keep-best leaves such pods'
  // ranking to kube-scheduler and prioritize).
  bool placement_preferences = false;
  std::vector<Container> containers;
  std::vector<Container> init_containers;
};

// A pod or node condition ("Ready", "PodScheduled", ...).
struct Condition {
  std::string type;
  std::string status;  // "True", "False", "Unknown"
  std::string reason;
  std::string message;
  std::string last_transition_time;
};

struct PodStatus {
  std::string phase;  // Pending, Running, Succeeded, Failed, Unknown (empty when not yet set)
  std::string reason;
  std::string message;
  std::string nominated_node_name;  // set by kube-scheduler's preemption for a pending pod
  std::string start_time;           // RFC 3339, as sent (empty before kubelet starts the pod)
  std::vector<Condition> conditions;
};

struct Pod {
  ObjectMeta metadata;
  PodSpec spec;
  PodStatus status;

  // "namespace/name", the cache key used by informers.
  std::string Key() const;
  // Succeeded or Failed: the pod's resources are released.
  bool IsTerminal() const;
  bool IsBeingDeleted() const { return metadata.deletion_timestamp.has_value(); }
  // The condition of `type`, or nullptr.
  const Condition* FindCondition(std::string_view type) const;
};

// One of status.addresses: type "InternalIP", "ExternalIP", "Hostname", ...
struct NodeAddress {
  std::string type;
  std::string address;
};

struct NodeStatus {
  StringMap capacity;
  StringMap allocatable;
  std::vector<Condition> conditions;
  std::vector<NodeAddress> addresses;
};

struct Node {
  ObjectMeta metadata;
  bool unschedulable = false;  // spec.unschedulable (cordoned)
  NodeStatus status;

  std::string Key() const { return metadata.name; }
  // True when the "Ready" condition has status "True".
  bool IsReady() const;
  const Condition* FindCondition(std::string_view type) const;
  // The first address of `type` ("InternalIP"), or "".
  std::string Address(std::string_view type) const;
};

// A label selector (metav1.LabelSelector): matchLabels and matchExpressions, ANDed.
struct LabelSelectorRequirement {
  std::string key;
  std::string op;  // In, NotIn, Exists, DoesNotExist
  std::vector<std::string> values;
};
struct LabelSelector {
  StringMap match_labels;
  std::vector<LabelSelectorRequirement> match_expressions;

  // No requirement at all (a null or empty selector).
  bool Empty() const { return match_labels.empty() && match_expressions.empty(); }
  // Whether `labels` satisfy every requirement; false for an invalid requirement (an unknown
  // operator, In/NotIn without values, Exists/DoesNotExist with values), as the API's
  // LabelSelectorAsSelector fails on it.
  bool Matches(const StringMap& labels) const;
};

// A policy/v1 PodDisruptionBudget: what preemption must respect.
struct PodDisruptionBudget {
  ObjectMeta metadata;
  LabelSelector selector;  // spec.selector
  int32_t disruptions_allowed = 0;
  std::set<std::string> disrupted_pods;  // status.disruptedPods: pod names already counted

  std::string Key() const { return metadata.namespace_ + "/" + metadata.name; }
  // kube-scheduler's reading for preemption: a budget covers a pod of its namespace that has
  // labels, when its selector is not empty and matches them.
  bool Covers(const std::string& ns, const StringMap& pod_labels) const;
};

// The body of POST .../pods/{name}/binding.
struct Binding {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;    // optional precondition: the bind fails if the pod's UID differs
  std::string node_name;  // target.name; target.kind is "Node"
  StringMap annotations;  // copied onto the pod by the API server
};

struct ObjectReference {
  std::string api_version;
  std::string kind;
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string resource_version;
  std::string field_path;
};

// A core/v1 Event.
struct Event {
  ObjectMeta metadata;  // name and namespace; the recorder fills them in
  ObjectReference involved_object;
  std::string reason;  // UpperCamelCase, e.g. "FailedAllocate"
  std::string message;
  std::string type = "Normal";   // "Normal" or "Warning"
  std::string source_component;  // source.component / reportingComponent
  std::string source_host;       // source.host
  std::string reporting_instance;
  std::string first_timestamp;
  std::string last_timestamp;
  int32_t count = 1;
};

// The API's Status object, returned with every error (and by some successful calls).
struct ApiStatus {
  std::string status;  // "Success" or "Failure"
  std::string message;
  std::string reason;  // "NotFound", "Conflict", "Expired", ...
  int code = 0;        // the HTTP status code
};

// Decoders. `j` is the object's JSON; a top-level null or non-object is an error.
Result<Pod> DecodePod(const nlohmann::json& j);
Result<Node> DecodeNode(const nlohmann::json& j);
Result<Event> DecodeEvent(const nlohmann::json& j);
Result<ApiStatus> DecodeApiStatus(const nlohmann::json& j);
Result<PodDisruptionBudget> DecodePodDisruptionBudget(const nlohmann::json& j);
Result<ObjectMeta> DecodeObjectMeta(const nlohmann::json& j, std::string_view path);

// Encoders for what gpushare sends.
nlohmann::json EncodeBinding(const Binding& b);
nlohmann::json EncodeEvent(const Event& e);

// The whole-unit count of extended resource `resource` requested by `c`: its limit, else its
// request (requests default to limits for extended resources), 0 when absent. Errors when the
// quantity is malformed, fractional or negative, or when request and limit differ (the API
// server rejects such pods, but input from other sources may carry them).
Result<int64_t> ExtendedResourceCount(const Container& c, std::string_view resource);

// Traits that let templates (the informer) handle each kind alike.
template <typename T>
struct ObjectTraits;

template <>
struct ObjectTraits<Pod> {
  static constexpr std::string_view kResource = "pods";
  static constexpr std::string_view kGroupVersion = "v1";
  static constexpr bool kNamespaced = true;
  static Result<Pod> Decode(const nlohmann::json& j) { return DecodePod(j); }
};

template <>
struct ObjectTraits<Node> {
  static constexpr std::string_view kResource = "nodes";
  static constexpr std::string_view kGroupVersion = "v1";
  static constexpr bool kNamespaced = false;
  static Result<Node> Decode(const nlohmann::json& j) { return DecodeNode(j); }
};

template <>
struct ObjectTraits<Event> {
  static constexpr std::string_view kResource = "events";
  static constexpr std::string_view kGroupVersion = "v1";
  static constexpr bool kNamespaced = true;
  static Result<Event> Decode(const nlohmann::json& j) { return DecodeEvent(j); }
};

template <>
struct ObjectTraits<PodDisruptionBudget> {
  static constexpr std::string_view kResource = "poddisruptionbudgets";
  static constexpr std::string_view kGroupVersion = "policy/v1";
  static constexpr bool kNamespaced = true;
  static Result<PodDisruptionBudget> Decode(const nlohmann::json& j) {
    return DecodePodDisruptionBudget(j);
  }
};

}  // namespace gpushare::kube
