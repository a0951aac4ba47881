// The kube-scheduler HTTP extender v1 wire format, as gpushare-scheduler reads and writes it.
//
// kube-scheduler encodes its requests with Go's encoding/json from types without JSON tags
// (../shared/reference/kubernetes-protocols.md §3): keys are the capitalised Go field names
// (`Pod`, `Nodes`, `NodeNames`, `PodName`, ...), unset pointer/map/slice fields are `null`, and
// embedded Kubernetes objects use their normal API JSON. Go decodes keys case-insensitively,
// so the decoders here do too (and refuse a key spelled two ways, which Go would resolve by
// document order that a JSON object model cannot see). The encoders emit exactly what Go would
// for the reply types: capitalised keys, `null` for unset fields.
//
// Hostile input: bodies are checked for nesting depth before parsing (a deeply nested array
// must not exhaust the stack), every field of the wrong type is an error naming it, and
// nothing here throws.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpushare::scheduler {

inline constexpr int kMaxJsonDepth = 64;

// A verb's reply: the HTTP status and the JSON body.
struct HttpReply {
  int code = 200;
  std::string body;
};

// Parses a request body: at most `max_depth` levels of nesting, a JSON object at the top.
Result<nlohmann::json> ParseBody(std::string_view body, int max_depth = kMaxJsonDepth);

// The member of `obj` whose key equals `name` ignoring case (as Go's encoding/json matches,
// including its Unicode folds of 'K' (U+212A) and 's' (U+017F)); nullptr when absent. An error
// when two keys match.
Result<const nlohmann::json*> FindField(const nlohmann::json& obj, std::string_view name);

// ExtenderArgs: the filter and prioritize request.
//
// The node names are views, not copies (5,000 names of 40 characters are 5,000 allocations
// otherwise): into the request body for names as kube-scheduler writes them, and into
// `unescaped_names` for names that had to be unescaped, or into `nodes`. So the body must
// outlive the args, and the args are move-only (a move keeps every viewed byte where it is).
struct ExtenderArgs {
  nlohmann::json pod;  // the Pod object (an object, never null)
  std::optional<std::vector<std::string_view>> node_names;  // NodeNames, when not null
  std::optional<std::vector<nlohmann::json>> nodes;         // Nodes.items, when Nodes is not null
  std::unique_ptr<const std::vector<std::string>>
      unescaped_names;  // what node_names views, when not the body

  ExtenderArgs() = default;
  ExtenderArgs(ExtenderArgs&&) = default;
  ExtenderArgs& operator=(ExtenderArgs&&) = default;

  // Node-cache mode (reply with NodeNames): NodeNames was given, or neither was.
  bool names_mode() const { return node_names.has_value() || !nodes.has_value(); }
  // The candidate names in request order (from NodeNames, or Nodes.items[].metadata.name),
  // viewing the args.
  std::vector<std::string_view> CandidateNames() const;
};
// Parses and decodes a request body in one pass (a SAX parser: the Pod and Nodes become JSON
// objects, NodeNames goes straight into strings, unknown keys are skipped unbuilt), with the
// same depth limit and errors as ParseBody.
// Requests as kube-scheduler writes them (plain ASCII keys and node names) take a fast path that
// reads NodeNames without a JSON lexer; everything else takes the general path, which alone
// words the errors.
Result<ExtenderArgs> ParseExtenderArgs(std::string_view body, int max_depth = kMaxJsonDepth);
// The general (SAX) path alone; tests check that both paths decode alike.
Result<ExtenderArgs> ParseExtenderArgsGeneral(std::string_view body, int max_depth = kMaxJsonDepth);

// ExtenderFilterResult.
struct FilterResult {
  bool names_mode = true;
  std::vector<std::string_view> node_names;         // names mode: the nodes that pass
  std::vector<nlohmann::json> nodes;                // nodes mode: the Node objects that pass
  std::map<std::string, std::string> failed;        // FailedNodes
  std::map<std::string, std::string> unresolvable;  // FailedAndUnresolvableNodes
  std::string error;                                // Error; when set, everything else is null
};
std::string EncodeFilterResult(const FilterResult& r);

// HostPriorityList.
struct HostPriority {
  std::string_view host;
  int64_t score = 0;
};
std::string EncodeHostPriorities(const std::vector<HostPriority>& list);

// ExtenderBindingArgs.
struct BindingArgs {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
};
Result<BindingArgs> DecodeBindingArgs(const nlohmann::json& body);
// ExtenderBindingResult: {"Error": "..."} ("" on success).
std::string EncodeBindingResult(std::string_view error);

// ExtenderPreemptionArgs: the preempt request. kube-scheduler sends its candidate victims per
// node as UIDs (NodeNameToMetaVictims, node-cache mode) or as whole pods (NodeNameToVictims);
// either way only the UIDs are kept. A null map is no node.
struct NodeVictims {
  std::vector<std::string> uids;
  int64_t pdb_violations = 0;  // NumPDBViolations
};
struct PreemptionArgs {
  nlohmann::json pod;  // the Pod object (an object, never null)
  std::map<std::string, NodeVictims> nodes;
};
Result<PreemptionArgs> DecodePreemptionArgs(const nlohmann::json& body);
// ExtenderPreemptionResult: {"NodeNameToMetaVictims": {node: {"Pods": [{"UID": ...}],
// "NumPDBViolations": n}}}, always the meta form (kube-scheduler reads only that).
std::string EncodePreemptionResult(const std::map<std::string, NodeVictims>& nodes);

// {"Error": "..."}: the body of an HTTP error reply of any verb (net::http::ErrorJson).
std::string EncodeError(std::string_view error);

}  // namespace gpushare::scheduler
