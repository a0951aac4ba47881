#include "tests/fakes/scheduler/fake_kube_scheduler.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <future>
#include <iterator>
#include <limits>
#include <thread>

#include "core/resource_name.h"
#include "kube/objects.h"
#include "kube/quantity.h"
#include "kube/timestamps.h"

namespace gpushare::fakes {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

constexpr std::chrono::milliseconds kDefaultHttpTimeout{5000};
constexpr int64_t kMaxNodeScore = 100;
constexpr int64_t kMaxExtenderPriority = 10;

// bytes.EqualFold for keys: ASCII case, plus U+212A KELVIN SIGN ~ k and U+017F LONG S ~ s.
std::string Fold(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 3, "\xE2\x84\xAA") == 0) {
      out += 'k';
      i += 2;
    } else if (s.compare(i, 2, "\xC5\xBF") == 0) {
      out += 's';
      i += 1;
    } else {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
    }
  }
  return out;
}

// An informer's copy of an object: the API JSON without kind and apiVersion.
json InformerObject(json o) {
  if (o.is_object()) {
    o.erase("kind");
    o.erase("apiVersion");
  }
  return o;
}

std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string NameOf(const json& obj) {
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return "";
  auto n = m->find("name");
  return n != m->end() && n->is_string() ? n->get<std::string>() : "";
}

std::string Str(const json& obj, const char* a, const char* b) {
  auto x = obj.find(a);
  if (x == obj.end() || !x->is_object()) return "";
  auto y = x->find(b);
  return y != x->end() && y->is_string() ? y->get<std::string>() : "";
}

bool IsExtendedResource(const std::string& name) {
  return name.find('/') != std::string::npos && ExtendedResourceNameProblem(name).empty();
}

int64_t Whole(const json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_string()) return 0;
  Result<int64_t> q = kube::ParseWholeQuantity(v.get<std::string>(), "quantity");
  return q.ok() ? *q : 0;
}

// The names of resources a container requests or limits.
void ResourceNames(const json& c, std::set<std::string>* out) {
  auto r = c.find("resources");
  if (r == c.end() || !r->is_object()) return;
  for (const char* part : {"requests", "limits"}) {
    auto m = r->find(part);
    if (m == r->end() || !m->is_object()) continue;
    for (auto it = m->begin(); it != m->end(); ++it) out->insert(it.key());
  }
}

std::vector<const json*> Containers(const json& pod, const char* field) {
  std::vector<const json*> out;
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return out;
  auto list = spec->find(field);
  if (list == spec->end() || !list->is_array()) return out;
  for (const json& c : *list) out.push_back(&c);
  return out;
}

int64_t ContainerRequest(const json& c, const std::string& resource) {
  auto r = c.find("resources");
  if (r == c.end() || !r->is_object()) return 0;
  for (const char* part : {"requests", "limits"}) {  // requests default to limits
    auto m = r->find(part);
    if (m == r->end() || !m->is_object()) continue;
    auto v = m->find(resource);
    if (v != m->end()) return Whole(*v);
  }
  return 0;
}

bool Terminal(const json& pod) {
  const std::string phase = Str(pod, "status", "phase");
  return phase == "Succeeded" || phase == "Failed";
}

// kube-scheduler's FitError text: "0/N nodes are available: <count> <reason>, ...", reasons
// sorted.
std::string FitError(size_t nodes, const std::map<std::string, std::string>& reasons) {
  std::map<std::string, int> histogram;
  for (const auto& [node, reason] : reasons) ++histogram[reason];
  std::vector<std::string> parts;
  for (const auto& [reason, n] : histogram) parts.push_back(std::to_string(n) + " " + reason);
  std::sort(parts.begin(), parts.end());
  std::string out = "0/" + std::to_string(nodes) + " nodes are available";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : ": ") + parts[i];
  return out + ".";
}

Result<ojson> ParseReply(const std::string& body, const char* what) {
  ojson j = ojson::parse(body, nullptr, false);
  if (j.is_discarded()) return Status::InvalidArgument(std::string(what) + ": reply is not JSON");
  return j;
}

// A `map[string]string` field: null/absent is empty; anything else but an object of strings is
// a decode error.
Status StringMap(const ojson& obj, const char* name, std::map<std::string, std::string>* out) {
  const ojson* f = GoField(obj, name);
  if (f == nullptr || f->is_null()) return Status::Ok();
  if (!f->is_object())
    return Status::InvalidArgument(std::string("json: cannot unmarshal into ") + name);
  for (auto it = f->begin(); it != f->end(); ++it) {
    if (!it.value().is_string())
      return Status::InvalidArgument(std::string("json: cannot unmarshal ") + name + " value");
    (*out)[it.key()] = it.value().get<std::string>();
  }
  return Status::Ok();
}

Status ErrorField(const ojson& obj) {
  const ojson* e = GoField(obj, "Error");
  if (e == nullptr || e->is_null()) return Status::Ok();
  if (!e->is_string()) return Status::InvalidArgument("json: cannot unmarshal Error");
  if (!e->get<std::string>().empty()) return Status::Unavailable(e->get<std::string>());
  return Status::Ok();
}

}  // namespace

const ojson* GoField(const ojson& obj, const std::string& name) {
  if (!obj.is_object()) return nullptr;
  const std::string want = Fold(name);
  const ojson* found = nullptr;
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (Fold(it.key()) == want) found = &it.value();  // document order: the last one wins
  return found;
}

Status ValidateExtenders(const std::vector<ExtenderConfig>& extenders) {
  int binders = 0;
  std::set<std::string> managed;
  for (size_t i = 0; i < extenders.size(); ++i) {
    const ExtenderConfig& e = extenders[i];
    const std::string where = "extenders[" + std::to_string(i) + "]";
    if (e.url_prefix.rfind("http://", 0) != 0 && e.url_prefix.rfind("https://", 0) != 0)
      return Status::InvalidArgument(where + ".urlPrefix: must include the scheme");
    if (!e.prioritize_verb.empty() && e.weight <= 0)
      return Status::InvalidArgument(where + ".weight: must have a positive weight applied to it");
    if (!e.bind_verb.empty() && ++binders > 1)
      return Status::InvalidArgument("only one extender can implement bind, found " +
                                     std::to_string(binders));
    if (e.tls_config) {
      const ExtenderTlsConfig& t = *e.tls_config;
      const bool has_ca = !t.ca_file.empty() || !t.ca_data.empty();
      if (has_ca && t.insecure)
        return Status::InvalidArgument(
            where + ": specifying a root certificates file with the insecure flag is not allowed");
      for (const std::string* f : {&t.cert_file, &t.key_file, &t.ca_file})
        if (!f->empty() && !std::ifstream(*f).good())
          return Status::InvalidArgument(where + ": open " + *f + ": cannot read");
    }
    for (const ManagedResource& r : e.managed_resources) {
      const std::string problem = r.name.find('/') == std::string::npos
                                      ? "not an extended resource name (no domain)"
                                      : ExtendedResourceNameProblem(r.name);
      if (!problem.empty())
        return Status::InvalidArgument(where + ".managedResources: " + r.name + ": " + problem);
      if (!managed.insert(r.name).second)
        return Status::InvalidArgument(where + ".managedResources: duplicate " + r.name);
    }
  }
  return Status::Ok();
}

// --- ExtenderClient ----------------------------------------------------------------------------

ExtenderClient::ExtenderClient(ExtenderConfig config) : config_(std::move(config)) {
  std::string url = config_.url_prefix;
  while (!url.empty() && url.back() == '/') url.pop_back();
  const size_t scheme = url.find("://");
  const size_t path = scheme == std::string::npos ? std::string::npos : url.find('/', scheme + 3);
  scheme_host_port_ = path == std::string::npos ? url : url.substr(0, path);
  path_prefix_ = path == std::string::npos ? "" : url.substr(path);
  if (scheme_host_port_.rfind("https://", 0) != 0) return;  // the URL decides, as in Go
  const ExtenderTlsConfig t = config_.tls_config.value_or(ExtenderTlsConfig{});
  auto pem = [this](const std::string& data, const std::string& file) {
    if (!data.empty() || file.empty()) return data;
    std::ifstream in(file, std::ios::binary);
    if (!in) tls_status_ = Status::InvalidArgument("open " + file + ": cannot read");
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  kube::ClientConfig cc;
  cc.server = scheme_host_port_;
  cc.ca_pem = pem(t.ca_data, t.ca_file);
  cc.insecure_skip_tls_verify = t.insecure || (config_.enable_https && cc.ca_pem.empty());
  if (cc.insecure_skip_tls_verify) cc.ca_pem.clear();
  cc.tls_server_name = t.server_name;
  const std::string cert = pem(t.cert_data, t.cert_file), key = pem(t.key_data, t.key_file);
  if (!cert.empty() && !key.empty()) {  // client-go: a certificate only with its key
    cc.client_cert_pem = cert;
    cc.client_key_pem = key;
  }
  cc.source = "extender " + config_.url_prefix;
  kube::ClientOptions co;
  co.qps = 0;  // kube-scheduler's extender client has no rate limit
  co.user_agent = "Go-http-client/1.1";
  co.request_timeout =
      config_.http_timeout.count() > 0 ? config_.http_timeout : kDefaultHttpTimeout;
  co.connect_timeout = co.request_timeout;
  Result<std::shared_ptr<kube::Client>> c = kube::Client::Create(std::move(cc), co);
  if (!c.ok()) {
    tls_status_ = c.status();
    return;
  }
  tls_client_ = *c;
}

bool ExtenderClient::IsInterested(const json& pod) const {
  if (config_.managed_resources.empty()) return true;
  std::set<std::string> names;
  for (const char* field : {"containers", "initContainers"})
    for (const json* c : Containers(pod, field)) ResourceNames(*c, &names);
  for (const ManagedResource& r : config_.managed_resources)
    if (names.count(r.name)) return true;
  return false;
}

Result<std::string> ExtenderClient::Post(const std::string& verb, const std::string& body) const {
  if (scheme_host_port_.rfind("https://", 0) == 0) {
    if (!tls_status_.ok()) return tls_status_;
    kube::HttpRequest req;
    req.method = "POST";
    req.path_and_query = path_prefix_ + "/" + verb;
    req.body = body;
    req.content_type = "application/json";
    Result<kube::HttpResponse> r = tls_client_->Do(req);
    if (!r.ok())
      return Status::Unavailable("POST " + scheme_host_port_ + req.path_and_query + ": " +
                                 r.status().message());
    if (r->code != 200)
      return Status::Unavailable("POST " + req.path_and_query + ": HTTP " +
                                 std::to_string(r->code) + ": " + r->body.substr(0, 300));
    return std::move(r->body);
  }
  httplib::Client cli(scheme_host_port_);
  const auto timeout =
      config_.http_timeout.count() > 0 ? config_.http_timeout : kDefaultHttpTimeout;
  const time_t sec = static_cast<time_t>(timeout.count() / 1000);
  const time_t usec = static_cast<time_t>((timeout.count() % 1000) * 1000);
  cli.set_connection_timeout(sec, usec);
  cli.set_read_timeout(sec, usec);
  cli.set_write_timeout(sec, usec);
  cli.set_tcp_nodelay(true);  // Go's net package sets TCP_NODELAY on every connection
  const std::string path = path_prefix_ + "/" + verb;
  // As Go's http.Transport writes it: its User-Agent, and "Accept-Encoding: gzip", which the
  // transport adds by itself and then undoes (a gzip reply is inflated before decoding).
  const httplib::Headers headers = {{"User-Agent", "Go-http-client/1.1"},
                                    {"Accept-Encoding", "gzip"}};
  httplib::Result r = cli.Post(path, headers, body, "application/json");
  if (!r)
    return Status::Unavailable("POST " + scheme_host_port_ + path + ": " +
                               httplib::to_string(r.error()));
  if (r->status != 200)
    return Status::Unavailable("POST " + path + ": HTTP " + std::to_string(r->status) + ": " +
                               r->body.substr(0, 300));
  return r->body;
}

std::string ExtenderClient::FilterRequestBody(const json& pod, const std::vector<json>& nodes,
                                              bool node_cache_capable) {
  std::string out = "{\"Pod\":" + Dump(InformerObject(pod)) + ",\"Nodes\":";
  if (node_cache_capable) {
    json names = json::array();
    for (const json& n : nodes) names.push_back(NameOf(n));
    out += "null,\"NodeNames\":" + Dump(names);
  } else {
    out += "{\"metadata\":{},\"items\":[";
    for (size_t i = 0; i < nodes.size(); ++i)
      out += (i ? "," : "") + Dump(InformerObject(nodes[i]));
    out += "]},\"NodeNames\":null";
  }
  return out + "}";
}

std::string ExtenderClient::BindRequestBody(const json& pod, const std::string& node) {
  return "{\"PodName\":" + Dump(json(Str(pod, "metadata", "name"))) +
         ",\"PodNamespace\":" + Dump(json(Str(pod, "metadata", "namespace"))) +
         ",\"PodUID\":" + Dump(json(Str(pod, "metadata", "uid"))) +
         ",\"Node\":" + Dump(json(node)) + "}";
}

Result<FilterOutcome> ExtenderClient::Filter(const json& pod,
                                             const std::vector<json>& nodes) const {
  Result<std::string> body =
      Post(config_.filter_verb, FilterRequestBody(pod, nodes, config_.node_cache_capable));
  if (!body.ok()) return body.status();
  Result<ojson> j = ParseReply(*body, "filter");
  if (!j.ok()) return j.status();
  if (!j->is_object())
    return Status::InvalidArgument("filter: json: cannot unmarshal into ExtenderFilterResult");
  FilterOutcome out;
  GPUSHARE_RETURN_IF_ERROR(StringMap(*j, "FailedNodes", &out.failed));
  GPUSHARE_RETURN_IF_ERROR(StringMap(*j, "FailedAndUnresolvableNodes", &out.unresolvable));
  const ojson* names = GoField(*j, "NodeNames");
  const ojson* list = GoField(*j, "Nodes");
  if (names && !names->is_null() && !names->is_array())
    return Status::InvalidArgument("filter: json: cannot unmarshal NodeNames");
  if (list && !list->is_null() && !list->is_object())
    return Status::InvalidArgument("filter: json: cannot unmarshal Nodes");
  GPUSHARE_RETURN_IF_ERROR(ErrorField(*j));
  std::set<std::string> sent;
  for (const json& n : nodes) sent.insert(NameOf(n));
  std::vector<std::string> result;
  if (config_.node_cache_capable && names && !names->is_null()) {
    for (const ojson& n : *names) {
      if (!n.is_string())
        return Status::InvalidArgument("filter: json: cannot unmarshal NodeNames element");
      result.push_back(n.get<std::string>());
    }
  } else if (list && !list->is_null()) {
    const ojson* items = GoField(*list, "items");
    if (items && !items->is_null()) {
      if (!items->is_array())
        return Status::InvalidArgument("filter: json: cannot unmarshal Nodes.items");
      for (const ojson& n : *items) {
        const ojson* meta = GoField(n, "metadata");
        const ojson* name = meta ? GoField(*meta, "name") : nullptr;
        result.push_back(name && name->is_string() ? name->get<std::string>() : "");
      }
    }
  }
  // Both null: every node is filtered out.
  for (const std::string& n : result) {
    if (!sent.count(n))
      return Status::InvalidArgument("extender " + config_.url_prefix +
                                     " claims a filtered node \"" + n +
                                     "\" which is not found in the input node list");
  }
  for (const auto& [n, reason] : out.unresolvable) out.failed.erase(n);
  out.feasible = std::move(result);
  return out;
}

Result<std::map<std::string, int64_t>> ExtenderClient::Prioritize(
    const json& pod, const std::vector<json>& nodes) const {
  Result<std::string> body =
      Post(config_.prioritize_verb, FilterRequestBody(pod, nodes, config_.node_cache_capable));
  if (!body.ok()) return body.status();
  Result<ojson> j = ParseReply(*body, "prioritize");
  if (!j.ok()) return j.status();
  std::map<std::string, int64_t> out;
  if (j->is_null()) return out;
  if (!j->is_array())
    return Status::InvalidArgument("prioritize: json: cannot unmarshal into HostPriorityList");
  for (const ojson& h : *j) {
    if (!h.is_object())
      return Status::InvalidArgument("prioritize: json: cannot unmarshal HostPriority");
    const ojson* host = GoField(h, "Host");
    const ojson* score = GoField(h, "Score");
    if (host && !host->is_null() && !host->is_string())
      return Status::InvalidArgument("prioritize: bad Host");
    if (score && !score->is_null() && !score->is_number_integer())
      return Status::InvalidArgument(
          "prioritize: json: cannot unmarshal number into Go struct field HostPriority.Score of "
          "type int64");
    out[host && host->is_string() ? host->get<std::string>() : ""] =
        score && score->is_number_integer() ? score->get<int64_t>() : 0;
  }
  return out;
}

Status ExtenderClient::Bind(const json& pod, const std::string& node) const {
  Result<std::string> body = Post(config_.bind_verb, BindRequestBody(pod, node));
  if (!body.ok()) return body.status();
  Result<ojson> j = ParseReply(*body, "bind");
  if (!j.ok()) return j.status();
  if (!j->is_object())
    return Status::InvalidArgument("bind: json: cannot unmarshal into ExtenderBindingResult");
  return ErrorField(*j);
}

Result<std::map<std::string, ExtenderClient::Victims>> ExtenderClient::ProcessPreemption(
    const json& pod, const std::map<std::string, Victims>& victims,
    const std::map<std::string, std::vector<json>>& pods_on_node) const {
  // ExtenderPreemptionArgs: Pod, NodeNameToVictims, NodeNameToMetaVictims (Go's field order).
  ojson args = ojson::object();
  args["Pod"] = ojson::parse(pod.dump());
  ojson full = ojson::object(), meta = ojson::object();
  for (const auto& [node, v] : victims) {
    ojson pods = ojson::array(), metas = ojson::array();
    for (const json& p : v.pods) {
      pods.push_back(ojson::parse(p.dump()));
      metas.push_back(ojson{{"UID", Str(p, "metadata", "uid")}});
    }
    full[node] = ojson{{"Pods", pods}, {"NumPDBViolations", v.pdb_violations}};
    meta[node] = ojson{{"Pods", metas}, {"NumPDBViolations", v.pdb_violations}};
  }
  args["NodeNameToVictims"] = config_.node_cache_capable ? ojson(nullptr) : full;
  args["NodeNameToMetaVictims"] = config_.node_cache_capable ? meta : ojson(nullptr);
  Result<std::string> body = Post(config_.preempt_verb, args.dump());
  if (!body.ok()) return body.status();
  Result<ojson> j = ParseReply(*body, "preempt");
  if (!j.ok()) return j.status();
  if (!j->is_object())
    return Status::InvalidArgument("preempt: json: cannot unmarshal into ExtenderPreemptionResult");
  std::map<std::string, Victims> out;
  const ojson* m = GoField(*j, "NodeNameToMetaVictims");
  if (m == nullptr || m->is_null()) return out;
  if (!m->is_object())
    return Status::InvalidArgument("preempt: NodeNameToMetaVictims: not an object");
  // convertToVictims: every node must be known, every UID a pod on that node.
  for (auto it = m->begin(); it != m->end(); ++it) {
    const auto known = pods_on_node.find(it.key());
    if (known == pods_on_node.end())
      return Status::NotFound("nodeinfo not found for node name \"" + it.key() + "\"");
    Victims v;
    if (it->is_object()) {
      if (const ojson* n = GoField(*it, "NumPDBViolations"); n != nullptr && n->is_number_integer())
        v.pdb_violations = n->get<int64_t>();
      const ojson* pods = GoField(*it, "Pods");
      if (pods != nullptr && pods->is_array()) {
        for (const ojson& mp : *pods) {
          const ojson* uid = mp.is_object() ? GoField(mp, "UID") : nullptr;
          const std::string u = uid != nullptr && uid->is_string() ? uid->get<std::string>() : "";
          auto p = std::find_if(known->second.begin(), known->second.end(),
                                [&](const json& k) { return Str(k, "metadata", "uid") == u; });
          if (p == known->second.end())
            return Status::InvalidArgument(
                "extender: " + config_.url_prefix + " claims to preempt pod (UID: " + u +
                ") on node: " + it.key() + ", but the pod is not found on that node");
          v.pods.push_back(*p);
        }
      }
    }
    out[it.key()] = std::move(v);
  }
  // callExtenders: a node kept without victims.
  for (auto it = out.begin(); it != out.end();) {
    if (!it->second.pods.empty()) {
      ++it;
      continue;
    }
    if (!config_.ignorable)
      return Status::InvalidArgument("expected at least one victim pod on node \"" + it->first +
                                     "\"");
    it = out.erase(it);
  }
  return out;
}

// --- FakeKubeScheduler -------------------------------------------------------------------------

namespace {

int32_t Priority(const json& pod) {
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return 0;
  auto p = spec->find("priority");
  return p != spec->end() && p->is_number_integer() ? p->get<int32_t>() : 0;
}

// status.startTime in ns; a pod without one counts as starting now (the latest).
int64_t StartNs(const json& pod) {
  const std::string t = Str(pod, "status", "startTime");
  Result<std::chrono::system_clock::time_point> tp =
      t.empty() ? Result<std::chrono::system_clock::time_point>(Status::NotFound(""))
                : kube::ParseTimestamp(t);
  if (!tp.ok()) return std::numeric_limits<int64_t>::max();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(tp->time_since_epoch()).count();
}

// Whether the pending pod `p` is nominated to `node` with a priority at least `pod`'s.
bool NominatedFor(const json& p, const std::string& node, const json& pod);

bool BeingDeleted(const json& pod) {
  auto m = pod.find("metadata");
  return m != pod.end() && m->is_object() && m->contains("deletionTimestamp") &&
         !(*m)["deletionTimestamp"].is_null();
}

bool NominatedFor(const json& p, const std::string& node, const json& pod) {
  return Str(p, "spec", "nodeName").empty() && Str(p, "status", "nominatedNodeName") == node &&
         Priority(p) >= Priority(pod);
}

// util.MoreImportantPod.
bool MoreImportant(const json& a, const json& b) {
  if (Priority(a) != Priority(b)) return Priority(a) > Priority(b);
  return StartNs(a) < StartNs(b);
}

// pickOneNodeForPreemption without score plugins.
std::string PickOne(const std::map<std::string, ExtenderClient::Victims>& c) {
  std::vector<std::string> nodes;
  for (const auto& [n, v] : c) nodes.push_back(n);
  auto keep_max = [&](auto score) {
    int64_t best = std::numeric_limits<int64_t>::min();
    std::vector<std::string> kept;
    for (const std::string& n : nodes) {
      const int64_t s = score(c.at(n));
      if (s > best) {
        best = s;
        kept.clear();
      }
      if (s == best) kept.push_back(n);
    }
    nodes = kept;
  };
  using V = ExtenderClient::Victims;
  keep_max([](const V& v) { return -v.pdb_violations; });
  keep_max([](const V& v) { return -static_cast<int64_t>(Priority(v.pods[0])); });
  keep_max([](const V& v) {
    int64_t sum = 0;
    for (const json& p : v.pods) sum += int64_t{Priority(p)} + (int64_t{1} << 31);
    return -sum;
  });
  keep_max([](const V& v) { return -static_cast<int64_t>(v.pods.size()); });
  keep_max([](const V& v) {
    const int32_t top = Priority(v.pods[0]);
    int64_t earliest = std::numeric_limits<int64_t>::max();
    for (const json& p : v.pods)
      if (Priority(p) == top) earliest = std::min(earliest, StartNs(p));
    return earliest;
  });
  return nodes.front();
}

}  // namespace

int64_t PodResourceRequest(const json& pod, const std::string& resource) {
  int64_t sum = 0;
  for (const json* c : Containers(pod, "containers")) sum += ContainerRequest(*c, resource);
  for (const json* c : Containers(pod, "initContainers"))
    sum = std::max(sum, ContainerRequest(*c, resource));
  return sum;
}

FakeKubeScheduler::FakeKubeScheduler(std::shared_ptr<kube::Client> api, SchedulerOptions options)
    : api_(std::move(api)), options_(std::move(options)), rng_(options_.seed) {
  for (const ExtenderConfig& e : options_.extenders)
    if (!e.ignorable) extenders_.push_back(std::make_unique<ExtenderClient>(e));
  for (const ExtenderConfig& e : options_.extenders)
    if (e.ignorable) extenders_.push_back(std::make_unique<ExtenderClient>(e));
}

void FakeKubeScheduler::ForgetAssumed() {
  std::lock_guard<std::mutex> l(mu_);
  assumed_.clear();
}

Result<std::vector<json>> FakeKubeScheduler::Nodes() {
  Result<kube::RawList> l = api_->List(kube::kNodes, "", {});
  if (!l.ok()) return l.status();
  std::vector<json> out;
  for (json& n : l->items) out.push_back(InformerObject(std::move(n)));
  return out;
}

Result<std::vector<json>> FakeKubeScheduler::Pods() {
  Result<kube::RawList> l = api_->List(kube::kPods, "", {});
  if (!l.ok()) return l.status();
  std::vector<json> out;
  std::set<std::string> bound, live;
  for (json& p : l->items) {
    if (Terminal(p)) continue;
    live.insert(Str(p, "metadata", "uid"));
    if (!Str(p, "spec", "nodeName").empty()) bound.insert(Str(p, "metadata", "uid"));
    out.push_back(InformerObject(std::move(p)));
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = assumed_.begin(); it != assumed_.end();) {
    // The API has caught up, or the pod is gone (deleted or finished: kube-scheduler's cache
    // drops an assumed pod on its delete event).
    if (bound.count(it->first) || !live.count(it->first)) {
      it = assumed_.erase(it);
      continue;
    }
    json p = it->second.second;
    p["spec"]["nodeName"] = it->second.first;
    out.push_back(std::move(p));
    ++it;
  }
  return out;
}

ScheduleResult FakeKubeScheduler::ScheduleOne(const std::string& ns, const std::string& name) {
  Result<json> pod = api_->Get(kube::kPods, ns, name);
  if (!pod.ok()) {
    ScheduleResult r;
    r.message = "reading pod: " + pod.status().message();
    return r;
  }
  return Schedule(*pod);
}

ScheduleResult FakeKubeScheduler::Cycle(const json& pod) {
  ScheduleResult res;
  const std::string uid = Str(pod, "metadata", "uid");
  Result<std::vector<json>> nodes = Nodes();
  Result<std::vector<json>> pods = nodes.ok() ? Pods() : Result<std::vector<json>>(nodes.status());
  if (!pods.ok()) {
    res.message = "reading the cluster: " + pods.status().message();
    return res;
  }
  // In-tree filtering: cordoned nodes, and NodeResourcesFit for extended resources that no
  // extender marked ignoredByScheduler (InTree).
  std::vector<json> feasible;
  for (const json& n : *nodes) {
    const std::string node = NameOf(n);
    auto spec = n.find("spec");
    if (spec != n.end() && spec->is_object() && spec->value("unschedulable", false)) {
      res.node_reasons[node] = "node(s) were unschedulable";
      res.unresolvable.insert(node);
      continue;
    }
    // RunFilterPluginsWithNominatedPods: pods nominated to the node with a priority at least
    // the pod's count there too.
    std::vector<const json*> here;
    for (const json& p : *pods)
      if (Str(p, "metadata", "uid") != uid &&
          (Str(p, "spec", "nodeName") == node || NominatedFor(p, node, pod)))
        here.push_back(&p);
    const std::string why = InTree(pod, n, here);
    if (!why.empty()) {
      res.node_reasons[node] = why;
      continue;
    }
    feasible.push_back(n);
  }
  const size_t total_nodes = nodes->size();
  // Extenders' filters, in order, each on the survivors of the previous.
  for (const auto& e : extenders_) {
    if (feasible.empty()) break;
    if (e->config().filter_verb.empty() || !e->IsInterested(pod)) continue;
    Result<FilterOutcome> f = e->Filter(pod, feasible);
    if (!f.ok()) {
      if (e->config().ignorable) continue;
      res.kind = ScheduleResult::Kind::kError;
      res.message = "extender filter: " + f.status().message();
      return res;
    }
    for (const auto& [n, why] : f->failed) res.node_reasons[n] = why;
    for (const auto& [n, why] : f->unresolvable) {
      res.node_reasons[n] = why;
      res.unresolvable.insert(n);
    }
    std::vector<json> kept;
    for (const std::string& name : f->feasible)
      for (const json& n : feasible)
        if (NameOf(n) == name) kept.push_back(n);
    for (const json& n : feasible) {
      const std::string name = NameOf(n);
      if (std::find(f->feasible.begin(), f->feasible.end(), name) == f->feasible.end() &&
          !res.node_reasons.count(name))
        res.node_reasons[name] = "filtered out by extender";  // removed without a reason
    }
    feasible = std::move(kept);
  }
  if (feasible.empty()) {
    res.kind = ScheduleResult::Kind::kUnschedulable;
    res.message = FitError(total_nodes, res.node_reasons);
    if (options_.preemption) Preempt(pod, *nodes, *pods, &res);
    return res;
  }
  // Prioritize: skipped with one feasible node; otherwise every interested extender, in
  // parallel; errors ignored.
  std::string chosen;
  if (feasible.size() == 1) {
    chosen = NameOf(feasible[0]);
  } else {
    for (const json& n : feasible) res.scores[NameOf(n)] = 0;  // in-tree score plugins: none
    std::vector<std::future<Result<std::map<std::string, int64_t>>>> calls;
    std::vector<const ExtenderClient*> who;
    for (const auto& e : extenders_) {
      if (e->config().prioritize_verb.empty() || !e->IsInterested(pod)) continue;
      const ExtenderClient* x = e.get();
      calls.push_back(std::async(std::launch::async,
                                 [x, &pod, &feasible] { return x->Prioritize(pod, feasible); }));
      who.push_back(x);
    }
    res.prioritize_called = !calls.empty();
    for (size_t i = 0; i < calls.size(); ++i) {
      Result<std::map<std::string, int64_t>> s = calls[i].get();
      if (!s.ok()) continue;
      for (const auto& [host, score] : *s) {
        auto it = res.scores.find(host);
        if (it != res.scores.end())
          it->second += score * who[i]->config().weight * (kMaxNodeScore / kMaxExtenderPriority);
      }
    }
    std::lock_guard<std::mutex> l(mu_);
    int64_t best = 0;
    int ties = 0;
    for (const json& n : feasible) {
      const std::string name = NameOf(n);
      const int64_t s = res.scores[name];
      if (ties == 0 || s > best) {
        best = s;
        chosen = name;
        ties = 1;
      } else if (s == best && rng_.Uniform(static_cast<uint64_t>(++ties)) == 0) {
        chosen = name;
      }
    }
  }
  // Assume, then bind.
  {
    std::lock_guard<std::mutex> l(mu_);
    assumed_[uid] = {chosen, pod};
  }
  res.kind = ScheduleResult::Kind::kBound;
  res.node = chosen;
  return res;
}

std::string FakeKubeScheduler::InTree(const json& pod, const json& n,
                                      const std::vector<const json*>& pods) const {
  std::set<std::string> ignored;
  for (const ExtenderConfig& e : options_.extenders)
    for (const ManagedResource& r : e.managed_resources)
      if (r.ignored_by_scheduler) ignored.insert(r.name);
  std::set<std::string> requested;
  for (const char* field : {"containers", "initContainers"})
    for (const json* c : Containers(pod, field)) ResourceNames(*c, &requested);
  for (const std::string& r : requested) {
    if (!IsExtendedResource(r) || ignored.count(r)) continue;
    const int64_t want = PodResourceRequest(pod, r);
    if (want == 0) continue;
    int64_t allocatable = 0;
    auto st = n.find("status");
    if (st != n.end() && st->is_object()) {
      auto a = st->find("allocatable");
      if (a != st->end() && a->is_object() && a->contains(r)) allocatable = Whole((*a)[r]);
    }
    int64_t used = 0;
    for (const json* p : pods) used += PodResourceRequest(*p, r);
    if (want > allocatable - used) return "Insufficient " + r;
  }
  return "";
}

void FakeKubeScheduler::Preempt(const json& pod, const std::vector<json>& nodes,
                                const std::vector<json>& pods, ScheduleResult* res) {
  const std::string uid = Str(pod, "metadata", "uid");
  const int32_t prio = Priority(pod);
  auto spec = pod.find("spec");
  if (spec != pod.end() && spec->is_object() && spec->value("preemptionPolicy", "") == "Never") {
    res->preemption_message = "not eligible due to preemptionPolicy=Never.";
    return;
  }
  std::map<std::string, std::vector<json>> on_node;
  std::map<std::string, std::vector<const json*>> nominated_here;
  for (const json& p : pods) {
    if (Str(p, "metadata", "uid") == uid) continue;
    if (!Str(p, "spec", "nodeName").empty()) {
      on_node[Str(p, "spec", "nodeName")].push_back(p);
    } else if (const std::string nn = Str(p, "status", "nominatedNodeName");
               !nn.empty() && NominatedFor(p, nn, pod)) {
      nominated_here[nn].push_back(&p);
    }
  }
  const std::string nominated = Str(pod, "status", "nominatedNodeName");
  if (!nominated.empty() && !res->unresolvable.count(nominated))
    for (const json& p : on_node[nominated])
      if (Priority(p) < prio && BeingDeleted(p)) {
        res->preemption_message = "not eligible due to a terminating pod on the nominated node.";
        return;
      }
  std::vector<kube::PodDisruptionBudget> pdbs;
  if (Result<kube::RawList> l = api_->List(kube::kPodDisruptionBudgets, "", {}); l.ok())
    for (const json& b : l->items)
      if (Result<kube::PodDisruptionBudget> d = kube::DecodePodDisruptionBudget(b); d.ok())
        pdbs.push_back(*d);
  std::map<std::string, ExtenderClient::Victims> candidates;
  for (const json& n : nodes) {
    const std::string name = NameOf(n);
    if (res->unresolvable.count(name) || !res->node_reasons.count(name)) continue;
    std::vector<json> potential;
    std::vector<const json*> remaining = nominated_here[name];
    for (const json& p : on_node[name]) {
      if (Priority(p) < prio && !BeingDeleted(p)) {
        potential.push_back(p);
      } else {
        remaining.push_back(&p);
      }
    }
    if (potential.empty() || !InTree(pod, n, remaining).empty()) continue;
    std::stable_sort(potential.begin(), potential.end(), MoreImportant);
    // FilterVictimsWithPDBViolation.
    std::vector<int32_t> left;
    for (const kube::PodDisruptionBudget& b : pdbs) left.push_back(b.disruptions_allowed);
    std::vector<bool> violating(potential.size(), false);
    for (size_t i = 0; i < potential.size(); ++i) {
      Result<kube::Pod> kp = kube::DecodePod(potential[i]);
      if (!kp.ok()) continue;
      for (size_t b = 0; b < pdbs.size(); ++b) {
        if (!pdbs[b].Covers(kp->metadata.namespace_, kp->metadata.labels) ||
            pdbs[b].disrupted_pods.count(kp->metadata.name))
          continue;
        if (--left[b] < 0) {
          violating[i] = true;
          break;
        }
      }
    }
    ExtenderClient::Victims v;
    for (bool pass : {true, false}) {
      for (size_t i = 0; i < potential.size(); ++i) {
        if (violating[i] != pass) continue;
        remaining.push_back(&potential[i]);
        if (InTree(pod, n, remaining).empty()) continue;
        remaining.pop_back();
        v.pods.push_back(potential[i]);
        if (violating[i]) ++v.pdb_violations;
      }
    }
    if (v.pods.empty()) continue;  // "expected at least one victim pod"
    std::stable_sort(v.pods.begin(), v.pods.end(), MoreImportant);
    candidates[name] = std::move(v);
  }
  if (candidates.empty()) {
    res->preemption_message = "preemption: 0/" + std::to_string(nodes.size()) +
                              " nodes are available: Preemption is not helpful for scheduling";
    return;
  }
  for (const auto& e : extenders_) {
    if (!e->SupportsPreemption() || !e->IsInterested(pod)) continue;
    Result<std::map<std::string, ExtenderClient::Victims>> r =
        e->ProcessPreemption(pod, candidates, on_node);
    if (!r.ok()) {
      if (e->config().ignorable) continue;
      res->kind = ScheduleResult::Kind::kError;
      res->message = "preemption: extender: " + r.status().message();
      return;
    }
    candidates = std::move(*r);
    if (candidates.empty()) break;
  }
  if (candidates.empty()) {
    res->preemption_message = "no candidate node for preemption";
    return;
  }
  const std::string chosen = PickOne(candidates);
  const std::string ns = Str(pod, "metadata", "namespace");
  for (const json& v : candidates.at(chosen).pods) {
    kube::DeleteOptions d;
    d.uid = Str(v, "metadata", "uid");
    Status s = api_->Delete(kube::kPods, Str(v, "metadata", "namespace"), NameOf(v), d);
    if (!s.ok() && s.code() != StatusCode::kNotFound) {
      res->kind = ScheduleResult::Kind::kError;
      res->message = "preemption: deleting " + NameOf(v) + ": " + s.message();
      return;
    }
    res->victims.push_back(d.uid);
  }
  kube::PatchOptions po;
  po.subresource = "status";
  Result<json> patched = api_->MergePatch(kube::kPods, ns, NameOf(pod),
                                          json{{"status", {{"nominatedNodeName", chosen}}}}, po);
  if (!patched.ok()) {
    res->kind = ScheduleResult::Kind::kError;
    res->message = "preemption: nominating: " + patched.status().message();
    return;
  }
  res->nominated_node = chosen;
}

ScheduleResult FakeKubeScheduler::Bind(const json& pod, ScheduleResult res) {
  const std::string uid = Str(pod, "metadata", "uid");
  const std::string chosen = res.node;
  const ExtenderClient* binder = nullptr;
  for (const auto& e : extenders_)
    if (e->IsBinder() && e->IsInterested(pod)) binder = e.get();
  Status bound = Status::Ok();
  if (binder != nullptr) {
    bound = binder->Bind(pod, chosen);
    if (!bound.ok() && binder->config().ignorable) binder = nullptr;
  }
  if (binder == nullptr) {
    bound = api_->Bind(
        {Str(pod, "metadata", "name"), Str(pod, "metadata", "namespace"), uid, chosen, {}});
  }
  if (!bound.ok()) {
    // Bound anyway (e.g. the reply timed out)? Then it is not requeued.
    Result<kube::Pod> now =
        api_->GetPod(Str(pod, "metadata", "namespace"), Str(pod, "metadata", "name"));
    if (!(now.ok() && now->spec.node_name == chosen)) {
      std::lock_guard<std::mutex> l(mu_);
      assumed_.erase(uid);
      res.kind = ScheduleResult::Kind::kError;
      res.node.clear();
      res.message = "binding rejected: " + bound.message();
      return res;
    }
  }
  return res;
}

ScheduleResult FakeKubeScheduler::Schedule(const json& pod_in) {
  const json pod = InformerObject(pod_in);
  ScheduleResult res = Cycle(pod);
  return res.bound() ? Bind(pod, std::move(res)) : res;
}

void FakeKubeScheduler::ScheduleAsync(const json& pod_in,
                                      std::function<void(const ScheduleResult&)> done) {
  const json pod = InformerObject(pod_in);
  ScheduleResult res = Cycle(pod);
  if (!res.bound()) {
    done(res);
    return;
  }
  std::unique_lock<std::mutex> l(bind_mu_);
  bind_cv_.wait(l, [&] { return binds_in_flight_ < std::max(1, options_.max_binds_in_flight); });
  ++binds_in_flight_;
  int64_t delay_us = 0;
  if (options_.bind_jitter.count() > 0) {
    std::lock_guard<std::mutex> r(mu_);
    delay_us =
        static_cast<int64_t>(rng_.Uniform(static_cast<uint64_t>(options_.bind_jitter.count()) + 1));
  }
  bind_threads_.emplace_back(
      [this, pod, res = std::move(res), done = std::move(done), delay_us]() mutable {
        if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
        ScheduleResult r = Bind(pod, std::move(res));
        done(r);
        std::lock_guard<std::mutex> l(bind_mu_);
        --binds_in_flight_;
        bind_cv_.notify_all();
      });
}

void FakeKubeScheduler::WaitBinds() {
  std::vector<std::thread> threads;
  {
    std::unique_lock<std::mutex> l(bind_mu_);
    bind_cv_.wait(l, [&] { return binds_in_flight_ == 0; });
    threads.swap(bind_threads_);
  }
  for (std::thread& t : threads) t.join();
}

FakeKubeScheduler::~FakeKubeScheduler() {
  WaitBinds();
}

}  // namespace gpushare::fakes
