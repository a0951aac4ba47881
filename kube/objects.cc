#include "kube/objects.h"

#include <algorithm>
#include <initializer_list>

#include "kube/quantity.h"

namespace gpushare::kube {
namespace {

using nlohmann::json;

const char* TypeName(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "object";
    case json::value_t::array:
      return "array";
    case json::value_t::string:
      return "string";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "number";
    default:
      return "value";
  }
}

Status WrongType(std::string_view path, std::string_view want, const json& got) {
  return Status::InvalidArgument(std::string(path) + ": expected " + std::string(want) + ", got " +
                                 TypeName(got));
}

std::string Join(std::string_view path, std::string_view key) {
  std::string s(path);
  s += '.';
  s += key;
  return s;
}

std::string Index(std::string_view path, size_t i) {
  return std::string(path) + "[" + std::to_string(i) + "]";
}

// Returns the member `key` of `obj`, or nullptr when it is absent or null. `obj` must be an object.
const json* Member(const json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// Returns the member `key` as an object (nullptr when missing/null), or an error for another type.
Result<const json*> ObjectMember(const json& obj, std::string_view key, std::string_view path) {
  const json* m = Member(obj, key);
  if (m == nullptr) return static_cast<const json*>(nullptr);
  if (!m->is_object()) return WrongType(Join(path, key), "object", *m);
  return m;
}

Status GetString(const json& obj, std::string_view key, std::string_view path, std::string* out) {
  const json* m = Member(obj, key);
  if (m == nullptr) return Status::Ok();
  if (!m->is_string()) return WrongType(Join(path, key), "string", *m);
  *out = m->get<std::string>();
  return Status::Ok();
}

// A string member and where it goes.
struct StringField {
  std::string_view key;
  std::string* out;
};

// The string members `fields` of `obj`, in their order (an absent one leaves its target as is).
Status GetStrings(const json& obj, std::string_view path,
                  std::initializer_list<StringField> fields) {
  for (const StringField& f : fields) GPUSHARE_RETURN_IF_ERROR(GetString(obj, f.key, path, f.out));
  return Status::Ok();
}

Status GetBool(const json& obj, std::string_view key, std::string_view path, bool* out) {
  const json* m = Member(obj, key);
  if (m == nullptr) return Status::Ok();
  if (!m->is_boolean()) return WrongType(Join(path, key), "boolean", *m);
  *out = m->get<bool>();
  return Status::Ok();
}

Status GetInt32(const json& obj, std::string_view key, std::string_view path, int32_t* out) {
  const json* m = Member(obj, key);
  if (m == nullptr) return Status::Ok();
  if (!m->is_number_integer()) return WrongType(Join(path, key), "integer", *m);
  int64_t v = m->get<int64_t>();
  if (v < INT32_MIN || v > INT32_MAX) {
    return Status::InvalidArgument(Join(path, key) + ": out of range");
  }
  *out = static_cast<int32_t>(v);
  return Status::Ok();
}

// A map of string values (labels, annotations).
Status GetStringMap(const json& obj, std::string_view key, std::string_view path, StringMap* out) {
  GPUSHARE_ASSIGN_OR_RETURN(const json* m, ObjectMember(obj, key, path));
  if (m == nullptr) return Status::Ok();
  for (auto it = (m)->begin(); it != (m)->end(); ++it) {
    if (!it->is_string()) return WrongType(Join(path, key) + "[" + it.key() + "]", "string", *it);
    (*out)[it.key()] = it->get<std::string>();
  }
  return Status::Ok();
}

// A map of quantities: strings, or numbers kept as their decimal spelling.
Status GetQuantityMap(const json& obj, std::string_view key, std::string_view path,
                      StringMap* out) {
  GPUSHARE_ASSIGN_OR_RETURN(const json* m, ObjectMember(obj, key, path));
  if (m == nullptr) return Status::Ok();
  for (auto it = (m)->begin(); it != (m)->end(); ++it) {
    if (it->is_string()) {
      (*out)[it.key()] = it->get<std::string>();
    } else if (it->is_number()) {
      (*out)[it.key()] = it->dump();
    } else if (!it->is_null()) {
      return WrongType(Join(path, key) + "[" + it.key() + "]", "quantity (string)", *it);
    }
  }
  return Status::Ok();
}

// Calls fn(element, element_path) for each element of the array member `key`.
template <typename Fn>
Status ForEach(const json& obj, std::string_view key, std::string_view path, Fn fn) {
  const json* m = Member(obj, key);
  if (m == nullptr) return Status::Ok();
  std::string p = Join(path, key);
  if (!m->is_array()) return WrongType(p, "array", *m);
  for (size_t i = 0; i < m->size(); ++i) {
    const json& e = (*m)[i];
    std::string ep = Index(p, i);
    if (!e.is_object()) return WrongType(ep, "object", e);
    GPUSHARE_RETURN_IF_ERROR(fn(e, ep));
  }
  return Status::Ok();
}

Status DecodeContainer(const json& j, std::string_view path, Container* c) {
  GPUSHARE_RETURN_IF_ERROR(GetString(j, "name", path, &c->name));
  GPUSHARE_RETURN_IF_ERROR(GetString(j, "image", path, &c->image));
  GPUSHARE_ASSIGN_OR_RETURN(const json* res, ObjectMember(j, "resources", path));
  if (res != nullptr) {
    std::string rp = Join(path, "resources");
    GPUSHARE_RETURN_IF_ERROR(GetQuantityMap(*res, "requests", rp, &c->resources.requests));
    GPUSHARE_RETURN_IF_ERROR(GetQuantityMap(*res, "limits", rp, &c->resources.limits));
  }
  return Status::Ok();
}

Status DecodeConditions(const json& obj, std::string_view path, std::vector<Condition>* out) {
  return ForEach(obj, "conditions", path, [&](const json& e, const std::string& ep) {
    Condition c;
    GPUSHARE_RETURN_IF_ERROR(GetStrings(e, ep,
                                        {{"type", &c.type},
                                         {"status", &c.status},
                                         {"reason", &c.reason},
                                         {"message", &c.message},
                                         {"lastTransitionTime", &c.last_transition_time}}));
    out->push_back(std::move(c));
    return Status::Ok();
  });
}

const Condition* Find(const std::vector<Condition>& conds, std::string_view type) {
  for (const Condition& c : conds) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

Status RequireObject(const json& j, std::string_view what) {
  if (!j.is_object()) return WrongType(what, "object", j);
  return Status::Ok();
}

}  // namespace

Result<ObjectMeta> DecodeObjectMeta(const json& j, std::string_view path) {
  ObjectMeta m;
  if (j.is_null()) return m;
  if (!j.is_object()) return WrongType(path, "object", j);
  std::string deletion;
  GPUSHARE_RETURN_IF_ERROR(GetStrings(j, path,
                                      {{"name", &m.name},
                                       {"namespace", &m.namespace_},
                                       {"uid", &m.uid},
                                       {"resourceVersion", &m.resource_version},
                                       {"generateName", &m.generate_name},
                                       {"creationTimestamp", &m.creation_timestamp},
                                       {"deletionTimestamp", &deletion}}));
  if (!deletion.empty()) m.deletion_timestamp = deletion;
  GPUSHARE_RETURN_IF_ERROR(GetStringMap(j, "labels", path, &m.labels));
  GPUSHARE_RETURN_IF_ERROR(GetStringMap(j, "annotations", path, &m.annotations));
  GPUSHARE_RETURN_IF_ERROR(
      ForEach(j, "ownerReferences", path, [&](const json& e, const std::string& ep) {
        OwnerReference r;
        GPUSHARE_RETURN_IF_ERROR(GetStrings(e, ep,
                                            {{"apiVersion", &r.api_version},
                                             {"kind", &r.kind},
                                             {"name", &r.name},
                                             {"uid", &r.uid}}));
        GPUSHARE_RETURN_IF_ERROR(GetBool(e, "controller", ep, &r.controller));
        m.owner_references.push_back(std::move(r));
        return Status::Ok();
      }));
  return m;
}

namespace {

// The object's "metadata" (when present) into *meta; `kind` names it in messages.
Status DecodeMetadataOf(const json& j, std::string_view kind, ObjectMeta* meta) {
  const json* m = Member(j, "metadata");
  if (m == nullptr) return Status::Ok();
  GPUSHARE_ASSIGN_OR_RETURN(*meta, DecodeObjectMeta(*m, std::string(kind) + ".metadata"));
  return Status::Ok();
}

// The pod spec's list `key` of containers, appended to *out.
Status DecodeContainers(const json& spec, const char* key, std::vector<Container>* out) {
  return ForEach(spec, key, "pod.spec", [&](const json& e, const std::string& ep) {
    Container c;
    GPUSHARE_RETURN_IF_ERROR(DecodeContainer(e, ep, &c));
    out->push_back(std::move(c));
    return Status::Ok();
  });
}

// Whether pod.spec `s` states a soft placement preference (PodSpec::placement_preferences). The
// API server validated these fields; anything unexpected here counts as no preference.
bool HasPlacementPreferences(const json& s) {
  constexpr std::string_view kPreferred = "preferredDuringSchedulingIgnoredDuringExecution";
  if (const json* affinity = Member(s, "affinity"); affinity != nullptr && affinity->is_object()) {
    for (const char* kind : {"nodeAffinity", "podAffinity", "podAntiAffinity"}) {
      const json* a = Member(*affinity, kind);
      const json* preferred = a != nullptr && a->is_object() ? Member(*a, kPreferred) : nullptr;
      if (preferred != nullptr && preferred->is_array() && !preferred->empty()) return true;
    }
  }
  if (const json* spread = Member(s, "topologySpreadConstraints");
      spread != nullptr && spread->is_array()) {
    for (const json& c : *spread) {
      const json* when = c.is_object() ? Member(c, "whenUnsatisfiable") : nullptr;
      if (when != nullptr && when->is_string() && *when == "ScheduleAnyway") return true;
    }
  }
  return false;
}

}  // namespace

Result<Pod> DecodePod(const json& j) {
  GPUSHARE_RETURN_IF_ERROR(RequireObject(j, "pod"));
  Pod p;
  GPUSHARE_RETURN_IF_ERROR(DecodeMetadataOf(j, "pod", &p.metadata));
  GPUSHARE_ASSIGN_OR_RETURN(const json* spec, ObjectMember(j, "spec", "pod"));
  if (spec != nullptr) {
    const json& s = *spec;
    GPUSHARE_RETURN_IF_ERROR(GetString(s, "nodeName", "pod.spec", &p.spec.node_name));
    GPUSHARE_RETURN_IF_ERROR(GetString(s, "schedulerName", "pod.spec", &p.spec.scheduler_name));
    GPUSHARE_RETURN_IF_ERROR(GetInt32(s, "priority", "pod.spec", &p.spec.priority));
    GPUSHARE_RETURN_IF_ERROR(DecodeContainers(s, "containers", &p.spec.containers));
    GPUSHARE_RETURN_IF_ERROR(DecodeContainers(s, "initContainers", &p.spec.init_containers));
    p.spec.placement_preferences = HasPlacementPreferences(s);
  }
  GPUSHARE_ASSIGN_OR_RETURN(const json* status, ObjectMember(j, "status", "pod"));
  if (status != nullptr) {
    const json& s = *status;
    GPUSHARE_RETURN_IF_ERROR(GetStrings(s, "pod.status",
                                        {{"phase", &p.status.phase},
                                         {"reason", &p.status.reason},
                                         {"message", &p.status.message},
                                         {"nominatedNodeName", &p.status.nominated_node_name},
                                         {"startTime", &p.status.start_time}}));
    GPUSHARE_RETURN_IF_ERROR(DecodeConditions(s, "pod.status", &p.status.conditions));
  }
  return p;
}

namespace {

Status DecodeLabelSelector(const json& obj, std::string_view key, std::string_view path,
                           LabelSelector* out) {
  GPUSHARE_ASSIGN_OR_RETURN(const json* sel, ObjectMember(obj, key, path));
  if (sel == nullptr) return Status::Ok();
  const std::string sp = Join(path, key);
  GPUSHARE_RETURN_IF_ERROR(GetStringMap(*sel, "matchLabels", sp, &out->match_labels));
  return ForEach(*sel, "matchExpressions", sp, [&](const json& e, const std::string& ep) {
    LabelSelectorRequirement r;
    GPUSHARE_RETURN_IF_ERROR(GetStrings(e, ep, {{"key", &r.key}, {"operator", &r.op}}));
    if (const json* values = Member(e, "values")) {
      if (!values->is_array()) return WrongType(Join(ep, "values"), "array", *values);
      for (size_t i = 0; i < values->size(); ++i) {
        const json& v = (*values)[i];
        if (!v.is_string()) return WrongType(Index(Join(ep, "values"), i), "string", v);
        r.values.push_back(v.get<std::string>());
      }
    }
    out->match_expressions.push_back(std::move(r));
    return Status::Ok();
  });
}

}  // namespace

bool LabelSelector::Matches(const StringMap& labels) const {
  for (const auto& [k, v] : match_labels) {
    const auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  for (const LabelSelectorRequirement& r : match_expressions) {
    const auto it = labels.find(r.key);
    const bool has = it != labels.end();
    const bool listed =
        has && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end();
    if (r.op == "In") {
      if (r.values.empty() || !listed) return false;
    } else if (r.op == "NotIn") {
      if (r.values.empty() || listed) return false;
    } else if (r.op == "Exists") {
      if (!r.values.empty() || !has) return false;
    } else if (r.op == "DoesNotExist") {
      if (!r.values.empty() || has) return false;
    } else {
      return false;
    }
  }
  return true;
}

bool PodDisruptionBudget::Covers(const std::string& ns, const StringMap& pod_labels) const {
  return ns == metadata.namespace_ && !pod_labels.empty() && !selector.Empty() &&
         selector.Matches(pod_labels);
}

Result<PodDisruptionBudget> DecodePodDisruptionBudget(const json& j) {
  GPUSHARE_RETURN_IF_ERROR(RequireObject(j, "poddisruptionbudget"));
  PodDisruptionBudget b;
  GPUSHARE_RETURN_IF_ERROR(DecodeMetadataOf(j, "poddisruptionbudget", &b.metadata));
  GPUSHARE_ASSIGN_OR_RETURN(const json* spec, ObjectMember(j, "spec", "poddisruptionbudget"));
  if (spec != nullptr)
    GPUSHARE_RETURN_IF_ERROR(
        DecodeLabelSelector(*spec, "selector", "poddisruptionbudget.spec", &b.selector));
  GPUSHARE_ASSIGN_OR_RETURN(const json* status, ObjectMember(j, "status", "poddisruptionbudget"));
  if (status != nullptr) {
    GPUSHARE_RETURN_IF_ERROR(GetInt32(*status, "disruptionsAllowed", "poddisruptionbudget.status",
                                      &b.disruptions_allowed));
    GPUSHARE_ASSIGN_OR_RETURN(const json* disrupted,
                              ObjectMember(*status, "disruptedPods", "poddisruptionbudget.status"));
    if (disrupted != nullptr)
      for (auto it = disrupted->begin(); it != disrupted->end(); ++it)
        b.disrupted_pods.insert(it.key());
  }
  return b;
}

Result<Node> DecodeNode(const json& j) {
  GPUSHARE_RETURN_IF_ERROR(RequireObject(j, "node"));
  Node n;
  GPUSHARE_RETURN_IF_ERROR(DecodeMetadataOf(j, "node", &n.metadata));
  GPUSHARE_ASSIGN_OR_RETURN(const json* spec, ObjectMember(j, "spec", "node"));
  if (spec != nullptr) {
    GPUSHARE_RETURN_IF_ERROR(GetBool(*spec, "unschedulable", "node.spec", &n.unschedulable));
  }
  GPUSHARE_ASSIGN_OR_RETURN(const json* status, ObjectMember(j, "status", "node"));
  if (status != nullptr) {
    const json& s = *status;
    GPUSHARE_RETURN_IF_ERROR(GetQuantityMap(s, "capacity", "node.status", &n.status.capacity));
    GPUSHARE_RETURN_IF_ERROR(
        GetQuantityMap(s, "allocatable", "node.status", &n.status.allocatable));
    GPUSHARE_RETURN_IF_ERROR(DecodeConditions(s, "node.status", &n.status.conditions));
    GPUSHARE_RETURN_IF_ERROR(
        ForEach(s, "addresses", "node.status", [&](const json& e, const std::string& ep) {
          NodeAddress a;
          GPUSHARE_RETURN_IF_ERROR(GetString(e, "type", ep, &a.type));
          GPUSHARE_RETURN_IF_ERROR(GetString(e, "address", ep, &a.address));
          n.status.addresses.push_back(std::move(a));
          return Status::Ok();
        }));
  }
  return n;
}

Result<Event> DecodeEvent(const json& j) {
  GPUSHARE_RETURN_IF_ERROR(RequireObject(j, "event"));
  Event e;
  e.type.clear();
  e.count = 0;
  GPUSHARE_RETURN_IF_ERROR(DecodeMetadataOf(j, "event", &e.metadata));
  GPUSHARE_ASSIGN_OR_RETURN(const json* io, ObjectMember(j, "involvedObject", "event"));
  if (io != nullptr) {
    ObjectReference& o = e.involved_object;
    GPUSHARE_RETURN_IF_ERROR(GetStrings(*io, "event.involvedObject",
                                        {{"apiVersion", &o.api_version},
                                         {"kind", &o.kind},
                                         {"namespace", &o.namespace_},
                                         {"name", &o.name},
                                         {"uid", &o.uid},
                                         {"resourceVersion", &o.resource_version},
                                         {"fieldPath", &o.field_path}}));
  }
  GPUSHARE_RETURN_IF_ERROR(GetStrings(j, "event",
                                      {{"reason", &e.reason},
                                       {"message", &e.message},
                                       {"type", &e.type},
                                       {"reportingComponent", &e.source_component},
                                       {"reportingInstance", &e.reporting_instance}}));
  GPUSHARE_ASSIGN_OR_RETURN(const json* source, ObjectMember(j, "source", "event"));
  if (source != nullptr) {
    std::string component;
    GPUSHARE_RETURN_IF_ERROR(GetString(*source, "component", "event.source", &component));
    if (!component.empty()) e.source_component = component;
    GPUSHARE_RETURN_IF_ERROR(GetString(*source, "host", "event.source", &e.source_host));
  }
  GPUSHARE_RETURN_IF_ERROR(GetString(j, "firstTimestamp", "event", &e.first_timestamp));
  GPUSHARE_RETURN_IF_ERROR(GetString(j, "lastTimestamp", "event", &e.last_timestamp));
  GPUSHARE_RETURN_IF_ERROR(GetInt32(j, "count", "event", &e.count));
  return e;
}

Result<ApiStatus> DecodeApiStatus(const json& j) {
  GPUSHARE_RETURN_IF_ERROR(RequireObject(j, "status"));
  ApiStatus s;
  GPUSHARE_RETURN_IF_ERROR(GetStrings(
      j, "status", {{"status", &s.status}, {"message", &s.message}, {"reason", &s.reason}}));
  int32_t code = 0;
  GPUSHARE_RETURN_IF_ERROR(GetInt32(j, "code", "status", &code));
  s.code = code;
  return s;
}

json EncodeBinding(const Binding& b) {
  json meta = {{"name", b.pod_name}, {"namespace", b.pod_namespace}};
  if (!b.pod_uid.empty()) meta["uid"] = b.pod_uid;
  if (!b.annotations.empty()) meta["annotations"] = b.annotations;
  return json{{"apiVersion", "v1"},
              {"kind", "Binding"},
              {"metadata", std::move(meta)},
              {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", b.node_name}}}};
}

json EncodeEvent(const Event& e) {
  json meta = {{"name", e.metadata.name}, {"namespace", e.metadata.namespace_}};
  if (!e.metadata.labels.empty()) meta["labels"] = e.metadata.labels;
  if (!e.metadata.annotations.empty()) meta["annotations"] = e.metadata.annotations;
  json involved = {{"kind", e.involved_object.kind}, {"name", e.involved_object.name}};
  auto put = [](json& o, const char* k, const std::string& v) {
    if (!v.empty()) o[k] = v;
  };
  put(involved, "apiVersion", e.involved_object.api_version);
  put(involved, "namespace", e.involved_object.namespace_);
  put(involved, "uid", e.involved_object.uid);
  put(involved, "resourceVersion", e.involved_object.resource_version);
  put(involved, "fieldPath", e.involved_object.field_path);
  json out = {{"apiVersion", "v1"},
              {"kind", "Event"},
              {"metadata", std::move(meta)},
              {"involvedObject", std::move(involved)},
              {"reason", e.reason},
              {"message", e.message},
              {"type", e.type},
              {"count", e.count}};
  json source = json::object();
  put(source, "component", e.source_component);
  put(source, "host", e.source_host);
  out["source"] = std::move(source);
  put(out, "reportingComponent", e.source_component);
  put(out, "reportingInstance",
      e.reporting_instance.empty() ? e.source_host : e.reporting_instance);
  put(out, "firstTimestamp", e.first_timestamp);
  put(out, "lastTimestamp", e.last_timestamp);
  return out;
}

std::string Pod::Key() const {
  return metadata.namespace_ + "/" + metadata.name;
}

bool Pod::IsTerminal() const {
  return status.phase == "Succeeded" || status.phase == "Failed";
}

const Condition* Pod::FindCondition(std::string_view type) const {
  return Find(status.conditions, type);
}

bool Node::IsReady() const {
  const Condition* c = FindCondition("Ready");
  return c != nullptr && c->status == "True";
}

const Condition* Node::FindCondition(std::string_view type) const {
  return Find(status.conditions, type);
}

std::string Node::Address(std::string_view type) const {
  for (const NodeAddress& a : status.addresses) {
    if (a.type == type) return a.address;
  }
  return "";
}

Result<int64_t> ExtendedResourceCount(const Container& c, std::string_view resource) {
  std::string key(resource);
  auto lim = c.resources.limits.find(key);
  auto req = c.resources.requests.find(key);
  std::string base = "container " + c.name + ": resources";
  std::optional<int64_t> limit, request;
  if (lim != c.resources.limits.end()) {
    GPUSHARE_ASSIGN_OR_RETURN(int64_t v,
                              ParseWholeQuantity(lim->second, base + ".limits[" + key + "]"));
    limit = v;
  }
  if (req != c.resources.requests.end()) {
    GPUSHARE_ASSIGN_OR_RETURN(int64_t v,
                              ParseWholeQuantity(req->second, base + ".requests[" + key + "]"));
    request = v;
  }
  if (limit && request && *limit != *request) {
    return Status::InvalidArgument(base + "[" + key + "]: request " + std::to_string(*request) +
                                   " differs from limit " + std::to_string(*limit) +
                                   " (extended resources cannot be overcommitted)");
  }
  if (limit) return *limit;
  if (request) return *request;
  return int64_t{0};
}

}  // namespace gpushare::kube
