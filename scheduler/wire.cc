#include "scheduler/wire.h"

#include <cctype>

namespace gpushare::scheduler {
namespace {

using json = nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Go's encoding/json folds keys with bytes.EqualFold semantics: ASCII case plus the two
// non-ASCII runes that fold to ASCII letters, KELVIN SIGN (k) and LATIN SMALL LETTER LONG S (s).
std::string FoldKey(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    if (c == 0xE2 && key.substr(i, 3) == "\xE2\x84\xAA") {
      out += 'k';
      i += 2;
    } else if (c == 0xC5 && key.substr(i, 2) == "\xC5\xBF") {
      out += 's';
      i += 1;
    } else {
      out += static_cast<char>(std::tolower(c));
    }
  }
  return out;
}

std::string_view TypeName(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::discarded: return "invalid";
    default: return "a number";
  }
}

Status WrongType(std::string_view field, std::string_view want, const json& got) {
  return Status::InvalidArgument(std::string(field) + ": must be " + std::string(want) + ", got " +
                                 std::string(TypeName(got)));
}

// A string field; null or absent is "".
Status StringField(const json& obj, std::string_view name, std::string* out) {
  Result<const json*> f = FindField(obj, name);
  if (!f.ok()) return f.status();
  if (*f == nullptr || (*f)->is_null()) return Status::Ok();
  if (!(*f)->is_string()) return WrongType(name, "a string", **f);
  *out = (*f)->get<std::string>();
  return Status::Ok();
}

json NullableMap(const std::map<std::string, std::string>& m) {
  json o = json::object();
  for (const auto& [k, v] : m) o[k] = v;
  return o;
}

}  // namespace

Result<json> ParseBody(std::string_view body, int max_depth) {
  int depth = 0;
  bool in_string = false, escape = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth)
        return Status::InvalidArgument("malformed JSON: nesting deeper than " + std::to_string(max_depth) +
                                       " levels at offset " + std::to_string(i));
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  if (body.empty()) return Status::InvalidArgument("malformed JSON: empty body");
  json j;
  try {
    j = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object()) return WrongType("request body", "a JSON object", j);
  return j;
}

Result<const json*> FindField(const json& obj, std::string_view name) {
  if (!obj.is_object()) return static_cast<const json*>(nullptr);
  const std::string want = FoldKey(name);
  const json* found = nullptr;
  std::string found_key;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (it.key().size() < name.size() || it.key().size() > name.size() * 3) continue;
    if (FoldKey(it.key()) != want) continue;
    if (found != nullptr)
      return Status::InvalidArgument("field " + std::string(name) + " appears twice (as \"" + found_key + "\" and \"" +
                                     it.key() + "\")");
    found = &it.value();
    found_key = it.key();
  }
  return found;
}

std::vector<std::string> ExtenderArgs::CandidateNames() const {
  if (node_names) return *node_names;
  std::vector<std::string> out;
  if (nodes) {
    for (const json& n : *nodes) out.push_back(n["metadata"]["name"].get<std::string>());
  }
  return out;
}

Result<ExtenderArgs> DecodeExtenderArgs(const json& body) {
  ExtenderArgs a;
  Result<const json*> pod = FindField(body, "Pod");
  if (!pod.ok()) return pod.status();
  if (*pod == nullptr || (*pod)->is_null()) return Status::InvalidArgument("Pod: missing or null");
  if (!(*pod)->is_object()) return WrongType("Pod", "an object", **pod);
  a.pod = **pod;
  Result<const json*> names = FindField(body, "NodeNames");
  if (!names.ok()) return names.status();
  if (*names != nullptr && !(*names)->is_null()) {
    if (!(*names)->is_array()) return WrongType("NodeNames", "an array of strings or null", **names);
    std::vector<std::string> v;
    v.reserve((*names)->size());
    for (size_t i = 0; i < (*names)->size(); ++i) {
      const json& e = (**names)[i];
      if (!e.is_string()) return WrongType("NodeNames[" + std::to_string(i) + "]", "a string", e);
      v.push_back(e.get<std::string>());
    }
    a.node_names = std::move(v);
  }
  Result<const json*> nodes = FindField(body, "Nodes");
  if (!nodes.ok()) return nodes.status();
  if (*nodes != nullptr && !(*nodes)->is_null()) {
    if (!(*nodes)->is_object()) return WrongType("Nodes", "a NodeList object or null", **nodes);
    std::vector<json> items;
    auto it = (*nodes)->find("items");
    if (it != (*nodes)->end() && !it->is_null()) {
      if (!it->is_array()) return WrongType("Nodes.items", "an array", *it);
      items.reserve(it->size());
      for (size_t i = 0; i < it->size(); ++i) {
        const json& n = (*it)[i];
        const std::string path = "Nodes.items[" + std::to_string(i) + "]";
        if (!n.is_object()) return WrongType(path, "a Node object", n);
        auto meta = n.find("metadata");
        if (meta == n.end() || !meta->is_object()) return Status::InvalidArgument(path + ".metadata: missing");
        auto name = meta->find("name");
        if (name == meta->end() || !name->is_string() || name->get<std::string>().empty())
          return Status::InvalidArgument(path + ".metadata.name: missing or not a string");
        items.push_back(n);
      }
    }
    a.nodes = std::move(items);
  }
  return a;
}

// Go's encoding/json writes struct fields in declaration order; so do these encoders.
std::string EncodeFilterResult(const FilterResult& r) {
  if (!r.error.empty())
    return "{\"Nodes\":null,\"NodeNames\":null,\"FailedNodes\":null,\"FailedAndUnresolvableNodes\":null,\"Error\":" +
           Dump(json(r.error)) + "}";
  std::string out = "{\"Nodes\":";
  if (r.names_mode) {
    out += "null,\"NodeNames\":" + Dump(json(r.node_names));
  } else {
    out += "{\"metadata\":{},\"items\":[";
    for (size_t i = 0; i < r.nodes.size(); ++i) out += (i ? "," : "") + Dump(r.nodes[i]);
    out += "]},\"NodeNames\":null";
  }
  out += ",\"FailedNodes\":" + Dump(NullableMap(r.failed));
  out += ",\"FailedAndUnresolvableNodes\":" + Dump(NullableMap(r.unresolvable));
  return out + ",\"Error\":\"\"}";
}

std::string EncodeHostPriorities(const std::vector<HostPriority>& list) {
  std::string out = "[";
  for (size_t i = 0; i < list.size(); ++i)
    out += std::string(i ? "," : "") + "{\"Host\":" + Dump(json(list[i].host)) + ",\"Score\":" +
           std::to_string(list[i].score) + "}";
  return out + "]";
}

Result<BindingArgs> DecodeBindingArgs(const json& body) {
  BindingArgs b;
  GPUSHARE_RETURN_IF_ERROR(StringField(body, "PodName", &b.pod_name));
  GPUSHARE_RETURN_IF_ERROR(StringField(body, "PodNamespace", &b.pod_namespace));
  GPUSHARE_RETURN_IF_ERROR(StringField(body, "PodUID", &b.pod_uid));
  GPUSHARE_RETURN_IF_ERROR(StringField(body, "Node", &b.node));
  if (b.pod_name.empty()) return Status::InvalidArgument("PodName: missing or empty");
  if (b.pod_namespace.empty()) return Status::InvalidArgument("PodNamespace: missing or empty");
  if (b.node.empty()) return Status::InvalidArgument("Node: missing or empty");
  return b;
}

std::string EncodeBindingResult(std::string_view error) { return Dump(json{{"Error", error}}); }

std::string EncodeError(std::string_view error) { return Dump(json{{"Error", error}}); }

}  // namespace gpushare::scheduler
