#include "tests/fakes/apiserver/fake_apiserver.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "kube/errors.h"
#include "tests/fakes/apiserver/selectors.h"

namespace gpushare::fakes {

using nlohmann::json;

namespace {

constexpr size_t kMaxLog = 200000;

struct ResourceInfo {
  Resource res;
  const char* plural;
  const char* kind;
  const char* list_kind;
  bool namespaced;
  const char* group_version;  // "v1" (under /api) or "group/version" (under /apis)
};

constexpr ResourceInfo kInfos[] = {
    {Resource::kPods, "pods", "Pod", "PodList", true, "v1"},
    {Resource::kNodes, "nodes", "Node", "NodeList", false, "v1"},
    {Resource::kEvents, "events", "Event", "EventList", true, "v1"},
    {Resource::kSecrets, "secrets", "Secret", "SecretList", true, "v1"},
    {Resource::kMutatingWebhookConfigurations, "mutatingwebhookconfigurations",
     "MutatingWebhookConfiguration", "MutatingWebhookConfigurationList", false,
     "admissionregistration.k8s.io/v1"},
    {Resource::kPodDisruptionBudgets, "poddisruptionbudgets", "PodDisruptionBudget",
     "PodDisruptionBudgetList", true, "policy/v1"},
};
constexpr size_t kResourceCount = sizeof kInfos / sizeof kInfos[0];

const ResourceInfo& Info(Resource r) {
  return kInfos[static_cast<int>(r)];
}

std::string Now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string NowPlus(int64_t seconds) {
  std::time_t t = std::time(nullptr) + seconds;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string Str(const json& obj, const char* a, const char* b = nullptr) {
  if (!obj.is_object()) return "";
  auto it = obj.find(a);
  if (it == obj.end()) return "";
  if (b == nullptr) return it->is_string() ? it->get<std::string>() : "";
  if (!it->is_object()) return "";
  auto jt = it->find(b);
  return jt != it->end() && jt->is_string() ? jt->get<std::string>() : "";
}

std::map<std::string, std::string> Labels(const json& obj) {
  std::map<std::string, std::string> out;
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) return out;
  const json& l = obj["metadata"].value("labels", json::object());
  if (!l.is_object()) return out;
  for (auto it = l.begin(); it != l.end(); ++it) {
    if (it->is_string()) out[it.key()] = it->get<std::string>();
  }
  return out;
}

const std::set<std::string>& SupportedFields(Resource r) {
  static const std::set<std::string> pods = {
      "metadata.name",      "metadata.namespace",      "spec.nodeName",    "spec.restartPolicy",
      "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
      "status.podIP",       "status.nominatedNodeName"};
  static const std::set<std::string> nodes = {"metadata.name", "spec.unschedulable"};
  static const std::set<std::string> secrets = {"metadata.name", "metadata.namespace", "type"};
  static const std::set<std::string> names = {"metadata.name"};
  static const std::set<std::string> events = {"metadata.name",
                                               "metadata.namespace",
                                               "involvedObject.kind",
                                               "involvedObject.namespace",
                                               "involvedObject.name",
                                               "involvedObject.uid",
                                               "involvedObject.apiVersion",
                                               "involvedObject.resourceVersion",
                                               "involvedObject.fieldPath",
                                               "reason",
                                               "reportingComponent",
                                               "source",
                                               "type"};
  switch (r) {
    case Resource::kPods:
      return pods;
    case Resource::kNodes:
      return nodes;
    case Resource::kEvents:
      return events;
    case Resource::kSecrets:
      return secrets;
    case Resource::kMutatingWebhookConfigurations:
    case Resource::kPodDisruptionBudgets:
      return names;
  }
  return pods;
}

std::map<std::string, std::string> Fields(Resource r, const json& o) {
  std::map<std::string, std::string> f;
  f["metadata.name"] = Str(o, "metadata", "name");
  f["metadata.namespace"] = Str(o, "metadata", "namespace");
  auto boolstr = [](const json& obj, const char* a, const char* b) -> std::string {
    if (!obj.contains(a) || !obj[a].is_object()) return "false";
    auto it = obj[a].find(b);
    return it != obj[a].end() && it->is_boolean() && it->get<bool>() ? "true" : "false";
  };
  switch (r) {
    case Resource::kPods:
      f["spec.nodeName"] = Str(o, "spec", "nodeName");
      f["spec.restartPolicy"] = Str(o, "spec", "restartPolicy");
      f["spec.schedulerName"] = Str(o, "spec", "schedulerName");
      f["spec.serviceAccountName"] = Str(o, "spec", "serviceAccountName");
      f["spec.hostNetwork"] = boolstr(o, "spec", "hostNetwork");
      f["status.phase"] = Str(o, "status", "phase");
      f["status.podIP"] = Str(o, "status", "podIP");
      f["status.nominatedNodeName"] = Str(o, "status", "nominatedNodeName");
      break;
    case Resource::kNodes:
      f["spec.unschedulable"] = boolstr(o, "spec", "unschedulable");
      break;
    case Resource::kEvents:
      for (const char* k :
           {"kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"}) {
        f[std::string("involvedObject.") + k] = Str(o, "involvedObject", k);
      }
      f["reason"] = Str(o, "reason");
      f["reportingComponent"] = Str(o, "reportingComponent");
      f["source"] = Str(o, "source", "component");
      f["type"] = Str(o, "type");
      break;
    case Resource::kSecrets:
      f["type"] = Str(o, "type");
      break;
    case Resource::kMutatingWebhookConfigurations:
    case Resource::kPodDisruptionBudgets:
      break;
  }
  return f;
}

json StatusJson(int code, std::string reason, const std::string& message, json details = nullptr) {
  if (reason.empty()) reason = kube::DefaultReason(code);
  json s = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
            {"status", "Failure"}, {"message", message}, {"reason", reason},
            {"code", code}};
  if (!details.is_null()) s["details"] = std::move(details);
  return s;
}

struct Reply {
  int code = 200;
  json body;
};

Reply Err(int code, const std::string& message, std::string reason = "", json details = nullptr) {
  return {code, StatusJson(code, std::move(reason), message, std::move(details))};
}

Reply NotFound(Resource r, const std::string& name) {
  return Err(404, std::string(Info(r).plural) + " \"" + name + "\" not found", "NotFound",
             json{{"name", name}, {"kind", Info(r).plural}});
}

Reply Conflict(Resource r, const std::string& name) {
  return Err(
      409,
      std::string("Operation cannot be fulfilled on ") + Info(r).plural + " \"" + name +
          "\": the object has been modified; please apply your changes to the latest version "
          "and try again",
      "Conflict", json{{"name", name}, {"kind", Info(r).plural}});
}

std::string ToHex(std::string_view s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

std::optional<std::string> FromHex(std::string_view s) {
  if (s.size() % 2 != 0) return std::nullopt;
  std::string out;
  auto v = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size(); i += 2) {
    int a = v(s[i]), b = v(s[i + 1]);
    if (a < 0 || b < 0) return std::nullopt;
    out += static_cast<char>(a * 16 + b);
  }
  return out;
}

std::optional<uint64_t> ParseRv(const std::string& s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

void CopyField(json& dst, const json& src, const char* key) {
  if (src.is_object() && src.contains(key)) {
    dst[key] = src[key];
  } else if (dst.is_object()) {
    dst.erase(key);
  }
}

// Pod spec is immutable apart from images, activeDeadlineSeconds, tolerations and the grace
// period (the real server's rule, slightly relaxed for tolerations).
bool PodSpecChangeAllowed(const json& old_spec, const json& new_spec) {
  if (!new_spec.is_object() || !old_spec.is_object()) return old_spec == new_spec;
  json n = new_spec;
  for (const char* list : {"containers", "initContainers"}) {
    if (!old_spec.contains(list) || !n.contains(list)) continue;
    const json& o = old_spec[list];
    json& c = n[list];
    if (!o.is_array() || !c.is_array() || o.size() != c.size()) return false;
    for (size_t i = 0; i < c.size(); ++i) {
      if (c[i].is_object() && o[i].is_object()) CopyField(c[i], o[i], "image");
    }
  }
  for (const char* k : {"activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds"}) {
    CopyField(n, old_spec, k);
  }
  return n == old_spec;
}

}  // namespace

std::string_view ResourceName(Resource r) {
  return Info(r).plural;
}

std::optional<Resource> ResourceFromName(std::string_view plural) {
  for (const ResourceInfo& i : kInfos) {
    if (plural == i.plural) return i.res;
  }
  return std::nullopt;
}

std::optional<Resource> ResourceFromKind(std::string_view kind) {
  for (const ResourceInfo& i : kInfos) {
    if (kind == i.kind) return i.res;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------

struct FakeApiServer::Impl {
  struct HistoryEvent {
    uint64_t rv;
    std::string type;  // ADDED MODIFIED DELETED
    std::string key;
    json obj;   // state after the event (for DELETED: the last state, with the new rv)
    json prev;  // state before (null for ADDED)
  };
  struct Store {
    std::map<std::string, json> objects;
    std::deque<HistoryEvent> history;
    uint64_t window_start = 0;  // events with rv > window_start are all in history
  };
  struct Watcher {
    Resource res;
    std::string ns;
    LabelSelector labels;
    FieldSelector fields;
    bool bookmarks = false;
    std::deque<std::string> queue;  // serialised event lines
    bool closing = false;
    CloseMode close_mode = CloseMode::kClean;
    bool bookmark_now = false;
    std::chrono::steady_clock::time_point deadline;
    std::chrono::steady_clock::time_point next_bookmark;
  };

  explicit Impl(FakeApiServerOptions o)
      : opt(std::move(o)), tokens(opt.tokens), rng(std::random_device{}()) {}

  FakeApiServerOptions opt;
  std::unique_ptr<httplib::Server> server;
  std::thread listen_thread;
  int port = -1;
  bool https = false;
  std::atomic<bool> stopping{false};
  std::atomic<bool> listen_done{false};

  mutable std::mutex mu;
  std::condition_variable cv;
  // Like a fresh etcd, the revision starts at 1: "0" means "any version" to list and watch, so
  // no list may ever report it.
  uint64_t rv = 1;
  Store stores[kResourceCount];
  std::set<std::shared_ptr<Watcher>> watchers;
  bool hold_events = false;  // HoldWatchEvents
  std::vector<std::string> tokens;
  std::map<std::string, FakeIdentity> identities;  // TokenReview
  std::vector<NonResourceGrant> grants;            // SubjectAccessReview
  std::vector<Fault> faults;
  std::vector<RecordedRequest> log;
  std::mt19937_64 rng;

  Store& S(Resource r) { return stores[static_cast<int>(r)]; }
  const Store& S(Resource r) const { return stores[static_cast<int>(r)]; }

  static std::string Key(Resource r, std::string_view ns, std::string_view name) {
    if (!Info(r).namespaced) return std::string(name);
    return std::string(ns) + "/" + std::string(name);
  }

  std::string NewUid() {
    std::uniform_int_distribution<uint64_t> d;
    uint64_t a = d(rng), b = d(rng);
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                  static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                  static_cast<unsigned>(((b >> 48) & 0x3fff) | 0x8000),
                  static_cast<unsigned long long>(b & 0xffffffffffffULL));
    return buf;
  }

  std::string RandomSuffix() {
    static const char* chars = "bcdfghjklmnpqrstvwxz2456789";
    std::string s;
    for (int i = 0; i < 5; ++i) s += chars[rng() % 27];
    return s;
  }

  // ---- watch fan-out ----

  bool Matches(const Watcher& w, const json& obj) const {
    if (!w.ns.empty() && Str(obj, "metadata", "namespace") != w.ns) return false;
    if (!w.labels.empty() && !w.labels.Matches(Labels(obj))) return false;
    if (!w.fields.empty() && !w.fields.Matches(Fields(w.res, obj))) return false;
    return true;
  }

  static std::string Line(const std::string& type, const json& obj) {
    return json{{"type", type}, {"object", obj}}.dump() + "\n";
  }

  // The event `w` sees for `e`, or "" (the real watch cache's conversion: an object that stops
  // matching is DELETED with its previous content at the new version).
  std::string Convert(const Watcher& w, const HistoryEvent& e) const {
    bool cur = e.type != "DELETED" && Matches(w, e.obj);
    bool old = e.type == "DELETED" ? Matches(w, e.obj) : (!e.prev.is_null() && Matches(w, e.prev));
    if (e.type == "DELETED") return old ? Line("DELETED", e.obj) : "";
    if (cur && !old) return Line("ADDED", e.obj);
    if (cur && old) return Line("MODIFIED", e.obj);
    if (!cur && old) {
      json gone = e.prev;
      gone["metadata"]["resourceVersion"] = std::to_string(e.rv);
      return Line("DELETED", gone);
    }
    return "";
  }

  // Records a write. `obj` is the new state (null when deleting, then `prev` is the last state).
  json Commit(Resource r, const std::string& key, json obj, json prev) {
    Store& s = S(r);
    ++rv;
    HistoryEvent e;
    e.rv = rv;
    e.key = key;
    if (obj.is_null()) {
      e.type = "DELETED";
      e.obj = prev;
      e.obj["metadata"]["resourceVersion"] = std::to_string(rv);
      e.prev = prev;
      s.objects.erase(key);
    } else {
      e.type = prev.is_null() ? "ADDED" : "MODIFIED";
      obj["metadata"]["resourceVersion"] = std::to_string(rv);
      e.obj = obj;
      e.prev = prev;
      s.objects[key] = obj;
    }
    for (const auto& w : watchers) {
      if (w->res != r || w->closing) continue;
      std::string line = Convert(*w, e);
      if (!line.empty()) w->queue.push_back(std::move(line));
    }
    json result = e.obj;
    s.history.push_back(std::move(e));
    while (s.history.size() > opt.history_limit) {
      s.window_start = s.history.front().rv;
      s.history.pop_front();
    }
    cv.notify_all();
    return result;
  }

  // The objects of `r` as they were at version `at` (at >= window_start).
  std::map<std::string, json> SnapshotAt(Resource r, uint64_t at) const {
    const Store& s = S(r);
    std::map<std::string, json> objs = s.objects;
    for (auto it = s.history.rbegin(); it != s.history.rend() && it->rv > at; ++it) {
      if (it->type == "ADDED") {
        objs.erase(it->key);
      } else {
        objs[it->key] = it->prev;
      }
    }
    return objs;
  }

  json Bookmark(Resource r) const {
    json meta = {{"resourceVersion", std::to_string(rv)}, {"creationTimestamp", nullptr}};
    json b = {{"kind", Info(r).kind}, {"apiVersion", Info(r).group_version}, {"metadata", meta}};
    // What the real server sends: an empty object of the kind, with its zero-valued fields.
    if (r == Resource::kPods) {
      b["spec"] = {{"containers", nullptr}};
      b["status"] = json::object();
    } else if (r == Resource::kNodes) {
      b["spec"] = json::object();
      b["status"] = {{"daemonEndpoints", {{"kubeletEndpoint", {{"Port", 0}}}}}};
    } else if (r == Resource::kEvents) {
      b["involvedObject"] = json::object();
      b["reportingComponent"] = "";
      b["reportingInstance"] = "";
    }
    return b;
  }

  // ---- object writes shared by HTTP handlers and test hooks ----

  json Prepare(Resource r, json obj) {
    if (!obj.is_object()) obj = json::object();
    obj["kind"] = Info(r).kind;
    obj["apiVersion"] = Info(r).group_version;
    if (!obj.contains("metadata") || !obj["metadata"].is_object()) obj["metadata"] = json::object();
    json& m = obj["metadata"];
    if (Info(r).namespaced && Str(obj, "metadata", "namespace").empty()) m["namespace"] = "default";
    if (!Info(r).namespaced) m.erase("namespace");
    if (Str(obj, "metadata", "uid").empty()) m["uid"] = NewUid();
    if (Str(obj, "metadata", "creationTimestamp").empty()) m["creationTimestamp"] = Now();
    return obj;
  }

  json UpsertLocked(Resource r, json obj) {
    obj = Prepare(r, std::move(obj));
    if (Str(obj, "metadata", "name").empty()) {
      obj["metadata"]["name"] = Str(obj, "metadata", "generateName") + RandomSuffix();
    }
    std::string key = Key(r, Str(obj, "metadata", "namespace"), Str(obj, "metadata", "name"));
    Store& s = S(r);
    auto it = s.objects.find(key);
    json prev = it == s.objects.end() ? json(nullptr) : it->second;
    if (!prev.is_null()) {
      obj["metadata"]["uid"] = prev["metadata"]["uid"];
      obj["metadata"]["creationTimestamp"] = prev["metadata"]["creationTimestamp"];
    }
    return Commit(r, key, std::move(obj), std::move(prev));
  }

  // ---- HTTP plumbing ----

  void Send(httplib::Response& res, const Reply& reply) {
    res.status = reply.code;
    res.set_content(reply.body.dump(), "application/json");
  }

  std::string BearerToken(const httplib::Request& req) const {
    std::string auth = req.get_header_value("Authorization");
    if (auth.rfind("Bearer ", 0) == 0) return auth.substr(7);
    return "";
  }

  static bool IsWatch(const httplib::Request& req) {
    std::string w = req.get_param_value("watch");
    return w == "true" || w == "1";
  }

  static std::string QueryOf(const httplib::Request& req) {
    size_t q = req.target.find('?');
    return q == std::string::npos ? "" : req.target.substr(q + 1);
  }

  // The first fault matching this request, consumed.
  std::optional<Fault> TakeFault(const httplib::Request& req, bool watch) {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 0; i < faults.size(); ++i) {
      Fault& f = faults[i];
      if (!f.method.empty() && f.method != req.method) continue;
      if (!f.path_contains.empty() && req.path.find(f.path_contains) == std::string::npos) continue;
      if (f.watch == 0 && watch) continue;
      if (f.watch == 1 && !watch) continue;
      Fault out = f;
      if (--f.count <= 0) faults.erase(faults.begin() + static_cast<long>(i));
      return out;
    }
    return std::nullopt;
  }

  void Record(const httplib::Request& req, bool watch, int status) {
    std::lock_guard<std::mutex> lock(mu);
    if (log.size() >= kMaxLog) return;
    RecordedRequest r;
    r.method = req.method;
    r.path = req.path;
    r.query = QueryOf(req);
    r.watch = watch;
    r.bearer_token = BearerToken(req);
    r.content_type = req.get_header_value("Content-Type");
    // Bindings only (small, and what tests look into); other bodies can be megabytes.
    if (req.path.size() > 8 && req.path.compare(req.path.size() - 8, 8, "/binding") == 0)
      r.body = req.body;
    r.status = status;
    log.push_back(std::move(r));
  }

  void Handle(const httplib::Request& req, httplib::Response& res) {
    std::vector<std::string> seg;
    {
      size_t i = 0;
      const std::string& p = req.path;
      while (i < p.size()) {
        while (i < p.size() && p[i] == '/') ++i;
        size_t j = p.find('/', i);
        if (j == std::string::npos) j = p.size();
        if (j > i) seg.push_back(p.substr(i, j - i));
        i = j;
      }
    }
    if (!seg.empty() && seg[0] == "_fake") {
      if (!opt.test_endpoints) {
        Send(res, Err(404, "the server could not find the requested resource", "NotFound"));
        return;
      }
      Send(res, HandleTestHook(req, seg));
      return;
    }
    bool watch = IsWatch(req);
    if (!seg.empty() && (seg[0] == "healthz" || seg[0] == "readyz" || seg[0] == "livez")) {
      res.set_content("ok", "text/plain");
      Record(req, false, 200);
      return;
    }
    // Authentication.
    {
      std::vector<std::string> accepted;
      {
        std::lock_guard<std::mutex> lock(mu);
        accepted = tokens;
      }
      if (!accepted.empty()) {
        std::string t = BearerToken(req);
        if (std::find(accepted.begin(), accepted.end(), t) == accepted.end()) {
          Send(res, Err(401, "Unauthorized", "Unauthorized"));
          Record(req, watch, 401);
          return;
        }
      }
    }
    if (std::optional<Fault> f = TakeFault(req, watch)) {
      if (f->kind == Fault::Kind::kHttpError) {
        Reply r = Err(f->http_code, f->message, f->reason);
        Send(res, r);
        if (f->http_code == 429 || f->http_code == 503) res.set_header("Retry-After", "1");
        Record(req, watch, f->http_code);
        return;
      }
      if (f->kind == Fault::Kind::kDropConnection) {
        // Headers promise a body that never comes: the client sees the connection break.
        res.status = 200;
        res.set_content_provider(4096, "application/json",
                                 [](size_t, size_t, httplib::DataSink&) { return false; });
        Record(req, watch, -1);
        return;
      }
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, f->delay, [&] { return stopping.load(); });
    }
    Reply reply = Route(req, res, seg, watch);
    if (reply.code == 0) {
      Record(req, watch, 200);  // a watch stream was set up
      return;
    }
    Send(res, reply);
    Record(req, watch, reply.code);
  }

  Reply Route(const httplib::Request& req, httplib::Response& res,
              const std::vector<std::string>& seg, bool watch) {
    if (seg.size() == 1 && seg[0] == "version") {
      return {200,
              {{"major", "1"},
               {"minor", "30"},
               {"gitVersion", "v1.30.0-gpushare-fake"},
               {"platform", "linux/amd64"}}};
    }
    if (seg.size() == 1 && seg[0] == "api") {
      return {200,
              {{"kind", "APIVersions"},
               {"versions", {"v1"}},
               {"serverAddressByClientCIDRs", json::array()}}};
    }
    if (seg.size() == 1 && seg[0] == "apis") {
      return {200, {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", json::array()}}};
    }
    // The group/version the path addresses: /api/v1/... or /apis/<group>/<version>/...
    std::string gv;
    size_t i = 2;
    if (seg.size() >= 2 && seg[0] == "api" && seg[1] == "v1") {
      gv = "v1";
    } else if (seg.size() >= 3 && seg[0] == "apis") {
      gv = seg[1] + "/" + seg[2];
      i = 3;
    } else {
      return Err(404, "the server could not find the requested resource", "NotFound");
    }
    if (seg.size() == i && gv != "v1") {
      json resources = json::array();
      for (const ResourceInfo& inf : kInfos)
        if (inf.group_version == gv)
          resources.push_back(
              {{"name", inf.plural},
               {"namespaced", inf.namespaced},
               {"kind", inf.kind},
               {"verbs", {"create", "delete", "get", "list", "patch", "update", "watch"}}});
      if (resources.empty())
        return Err(404, "the server could not find the requested resource", "NotFound");
      return {200, {{"kind", "APIResourceList"}, {"groupVersion", gv}, {"resources", resources}}};
    }
    if (seg.size() == 2) {
      json resources = json::array();
      for (const ResourceInfo& inf : kInfos) {
        if (std::string_view(inf.group_version) != "v1") continue;
        resources.push_back(
            {{"name", inf.plural},
             {"namespaced", inf.namespaced},
             {"kind", inf.kind},
             {"verbs", {"create", "delete", "get", "list", "patch", "update", "watch"}}});
      }
      resources.push_back({{"name", "pods/binding"},
                           {"namespaced", true},
                           {"kind", "Binding"},
                           {"verbs", {"create"}}});
      resources.push_back({{"name", "pods/status"},
                           {"namespaced", true},
                           {"kind", "Pod"},
                           {"verbs", {"get", "patch", "update"}}});
      resources.push_back({{"name", "nodes/status"},
                           {"namespaced", false},
                           {"kind", "Node"},
                           {"verbs", {"get", "patch", "update"}}});
      return {200, {{"kind", "APIResourceList"}, {"groupVersion", "v1"}, {"resources", resources}}};
    }
    std::string ns;
    if (seg[i] == "namespaces") {
      if (seg.size() < i + 3)
        return Err(404,
                   "the server could not find the requested resource (namespaces are not served)",
                   "NotFound");
      ns = seg[i + 1];
      i += 2;
    }
    if (ns.empty() && seg.size() == i + 1 &&
        ((gv == "authentication.k8s.io/v1" && seg[i] == "tokenreviews") ||
         (gv == "authorization.k8s.io/v1" && seg[i] == "subjectaccessreviews"))) {
      if (req.method != "POST")
        return Err(405, "the server does not allow this method on the requested resource",
                   "MethodNotAllowed");
      return seg[i] == "tokenreviews" ? HandleTokenReview(req) : HandleAccessReview(req);
    }
    if (!ns.empty() && seg[i] == "bindings" && seg.size() == i + 1 && req.method == "POST") {
      return HandleBinding(req, ns, "");
    }
    std::optional<Resource> r = ResourceFromName(seg[i]);
    if (!r || Info(*r).group_version != gv || (Info(*r).namespaced == false && !ns.empty())) {
      return Err(404, "the server could not find the requested resource", "NotFound");
    }
    std::string name = seg.size() > i + 1 ? seg[i + 1] : "";
    std::string sub = seg.size() > i + 2 ? seg[i + 2] : "";
    if (seg.size() > i + 3)
      return Err(404, "the server could not find the requested resource", "NotFound");
    if (Info(*r).namespaced && !name.empty() && ns.empty()) {
      return Err(404, "the server could not find the requested resource", "NotFound");
    }
    if (!sub.empty() && sub != "status" && !(sub == "binding" && *r == Resource::kPods)) {
      return Err(404, "the server could not find the requested resource", "NotFound");
    }
    const std::string& m = req.method;
    if (name.empty()) {
      if (m == "GET") return watch ? StartWatch(req, res, *r, ns) : HandleList(req, *r, ns);
      if (m == "POST") {
        if (ns.empty() && Info(*r).namespaced) {
          return Err(405, "create of a namespaced resource needs a namespace in the path",
                     "MethodNotAllowed");
        }
        return HandleCreate(req, *r, ns);
      }
      return Err(405, "the server does not allow this method on the requested resource",
                 "MethodNotAllowed");
    }
    if (sub == "binding") {
      if (m != "POST")
        return Err(405, "the server does not allow this method on the requested resource",
                   "MethodNotAllowed");
      return HandleBinding(req, ns, name);
    }
    if (m == "GET") return HandleGet(*r, ns, name);
    if (m == "PATCH") return HandlePatch(req, *r, ns, name, sub);
    if (m == "PUT") return HandlePut(req, *r, ns, name, sub);
    if (m == "DELETE" && sub.empty()) return HandleDelete(req, *r, ns, name);
    return Err(405, "the server does not allow this method on the requested resource",
               "MethodNotAllowed");
  }

  static Result<json> ParseBody(const httplib::Request& req) {
    json j = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      return Status::InvalidArgument("the request body is not valid JSON");
    }
    return j;
  }

  // Waits (up to too_large_rv_wait) for the store to reach `want`; false if it does not.
  bool WaitForVersion(std::unique_lock<std::mutex>& lock, uint64_t want) {
    if (rv >= want) return true;
    cv.wait_for(lock, opt.too_large_rv_wait, [&] { return rv >= want || stopping.load(); });
    return rv >= want;
  }

  Reply TooLarge(uint64_t want) {
    return Err(
        504,
        "Too large resource version: " + std::to_string(want) + ", current: " + std::to_string(rv),
        "Timeout",
        json{{"causes",
              {{{"reason", "ResourceVersionTooLarge"}, {"message", "Too large resource version"}}}},
             {"retryAfterSeconds", 1}});
  }

  Reply HandleGet(Resource r, const std::string& ns, const std::string& name) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = S(r).objects.find(Key(r, ns, name));
    if (it == S(r).objects.end()) return NotFound(r, name);
    return {200, it->second};
  }

  Reply HandleList(const httplib::Request& req, Resource r, const std::string& ns) {
    Result<LabelSelector> ls = LabelSelector::Parse(req.get_param_value("labelSelector"));
    if (!ls.ok()) return Err(400, ls.status().message(), "BadRequest");
    Result<FieldSelector> fs =
        FieldSelector::Parse(req.get_param_value("fieldSelector"), SupportedFields(r));
    if (!fs.ok()) return Err(400, fs.status().message(), "BadRequest");
    int64_t limit = 0;
    if (req.has_param("limit")) {
      std::optional<uint64_t> l = ParseRv(req.get_param_value("limit"));
      if (!l) return Err(400, "limit: invalid value", "BadRequest");
      limit = static_cast<int64_t>(*l);
    }
    std::string rv_param = req.get_param_value("resourceVersion");
    std::string match = req.get_param_value("resourceVersionMatch");
    std::string cont = req.get_param_value("continue");

    std::unique_lock<std::mutex> lock(mu);
    const Store& s = S(r);
    uint64_t at = rv;
    std::string start_after;
    bool snapshot = false;
    if (!cont.empty()) {
      if (!rv_param.empty() && rv_param != "0") {
        return Err(400, "specifying resource version is not allowed when using continue",
                   "BadRequest");
      }
      std::optional<std::string> raw = FromHex(cont);
      json tok = raw ? json::parse(*raw, nullptr, false) : json();
      if (!tok.is_object() || !tok.contains("rv") || !tok["rv"].is_number_unsigned() ||
          !tok.contains("start")) {
        return Err(400, "continue key is not valid", "BadRequest");
      }
      at = tok["rv"].get<uint64_t>();
      start_after = tok["start"].get<std::string>();
      if (at < s.window_start) {
        return Err(
            410,
            "The provided continue parameter is too old to display a consistent list result. "
            "You can start a new list without the continue parameter.",
            "Expired");
      }
      snapshot = true;
    } else if (!rv_param.empty() && rv_param != "0") {
      std::optional<uint64_t> want = ParseRv(rv_param);
      if (!want)
        return Err(400, "resourceVersion: Invalid value: \"" + rv_param + "\"", "BadRequest");
      if (match == "Exact") {
        if (*want < s.window_start) {
          return Err(410,
                     "too old resource version: " + rv_param + " (" +
                         std::to_string(s.window_start + 1) + ")",
                     "Expired");
        }
        if (!WaitForVersion(lock, *want)) return TooLarge(*want);
        at = *want;
        snapshot = true;
      } else if (match.empty() || match == "NotOlderThan") {
        if (!WaitForVersion(lock, *want)) return TooLarge(*want);
        at = rv;
      } else {
        return Err(400, "resourceVersionMatch: Unsupported value: \"" + match + "\"", "BadRequest");
      }
    } else if (!match.empty() && rv_param.empty()) {
      return Err(400, "resourceVersionMatch is forbidden unless resourceVersion is provided",
                 "BadRequest");
    }
    std::map<std::string, json> snap;
    const std::map<std::string, json>* objs = &s.objects;
    if (snapshot && at != rv) {
      snap = SnapshotAt(r, at);
      objs = &snap;
    }
    json items = json::array();
    std::string last_key;
    size_t remaining = 0;
    bool more = false;
    for (auto it = start_after.empty() ? objs->begin() : objs->upper_bound(start_after);
         it != objs->end(); ++it) {
      const json& o = it->second;
      if (!ns.empty() && Str(o, "metadata", "namespace") != ns) continue;
      if (!ls->empty() && !ls->Matches(Labels(o))) continue;
      if (!fs->empty() && !fs->Matches(Fields(r, o))) continue;
      if (limit > 0 && static_cast<int64_t>(items.size()) >= limit) {
        more = true;
        ++remaining;
        continue;
      }
      json item = o;
      item.erase("kind");  // list items carry no kind/apiVersion, as the real server sends them
      item.erase("apiVersion");
      items.push_back(std::move(item));
      last_key = it->first;
    }
    json meta = {{"resourceVersion", std::to_string(at)}};
    if (more) {
      meta["continue"] = ToHex(json{{"rv", at}, {"start", last_key}}.dump());
      meta["remainingItemCount"] = remaining;
    }
    return {200,
            {{"kind", Info(r).list_kind},
             {"apiVersion", Info(r).group_version},
             {"metadata", meta},
             {"items", items}}};
  }

  Reply StartWatch(const httplib::Request& req, httplib::Response& res, Resource r,
                   const std::string& ns) {
    auto w = std::make_shared<Watcher>();
    w->res = r;
    w->ns = ns;
    Result<LabelSelector> ls = LabelSelector::Parse(req.get_param_value("labelSelector"));
    if (!ls.ok()) return Err(400, ls.status().message(), "BadRequest");
    Result<FieldSelector> fs =
        FieldSelector::Parse(req.get_param_value("fieldSelector"), SupportedFields(r));
    if (!fs.ok()) return Err(400, fs.status().message(), "BadRequest");
    w->labels = std::move(*ls);
    w->fields = std::move(*fs);
    std::string b = req.get_param_value("allowWatchBookmarks");
    w->bookmarks = b == "true" || b == "1";
    int timeout = opt.default_watch_timeout_seconds;
    if (req.has_param("timeoutSeconds")) {
      std::optional<uint64_t> t = ParseRv(req.get_param_value("timeoutSeconds"));
      if (!t) return Err(400, "timeoutSeconds: invalid value", "BadRequest");
      timeout = static_cast<int>(std::min<uint64_t>(*t, 86400));
    }
    auto now = std::chrono::steady_clock::now();
    w->deadline = now + std::chrono::seconds(timeout);
    w->next_bookmark = now + opt.bookmark_interval;
    std::string rv_param = req.get_param_value("resourceVersion");
    {
      std::unique_lock<std::mutex> lock(mu);
      Store& s = S(r);
      if (rv_param.empty() || rv_param == "0") {
        for (const auto& [k, o] : s.objects) {
          if (Matches(*w, o)) w->queue.push_back(Line("ADDED", o));
        }
      } else {
        std::optional<uint64_t> from = ParseRv(rv_param);
        if (!from)
          return Err(400, "resourceVersion: Invalid value: \"" + rv_param + "\"", "BadRequest");
        if (*from < s.window_start) {
          // HTTP 200, then the error as an event, as the watch cache answers.
          w->queue.push_back(
              Line("ERROR", StatusJson(410, "Expired",
                                       "too old resource version: " + rv_param + " (" +
                                           std::to_string(s.window_start + 1) + ")")));
          w->closing = true;
          w->close_mode = CloseMode::kClean;
        } else {
          if (!WaitForVersion(lock, *from)) return TooLarge(*from);
          for (const HistoryEvent& e : s.history) {
            if (e.rv <= *from) continue;
            std::string line = Convert(*w, e);
            if (!line.empty()) w->queue.push_back(std::move(line));
          }
        }
      }
      watchers.insert(w);
    }
    res.status = 200;
    res.set_chunked_content_provider(
        "application/json",
        [this, w](size_t, httplib::DataSink& sink) { return StreamStep(w, sink); },
        [this, w](bool) {
          std::lock_guard<std::mutex> lock(mu);
          watchers.erase(w);
        });
    return {0, nullptr};
  }

  // One step of a watch stream: writes what is queued (or a bookmark), or ends the stream.
  bool StreamStep(const std::shared_ptr<Watcher>& w, httplib::DataSink& sink) {
    std::string out;
    bool end = false;
    {
      std::unique_lock<std::mutex> lock(mu);
      for (;;) {
        if (stopping.load()) {
          end = true;
          break;
        }
        if (w->closing && w->close_mode == CloseMode::kDrop) return false;
        if (!w->queue.empty() && !hold_events) {
          while (!w->queue.empty()) {
            out += w->queue.front();
            w->queue.pop_front();
          }
          break;
        }
        if (w->closing) {
          if (w->close_mode == CloseMode::kGone) {
            out = Line("ERROR", StatusJson(410, "Expired", "the watch was expired by the test"));
            w->close_mode = CloseMode::kClean;
            break;
          }
          end = true;
          break;
        }
        auto now = std::chrono::steady_clock::now();
        if (now >= w->deadline) {
          end = true;
          break;
        }
        if (w->bookmarks && !hold_events && (w->bookmark_now || now >= w->next_bookmark)) {
          w->bookmark_now = false;
          w->next_bookmark = now + opt.bookmark_interval;
          out = Line("BOOKMARK", Bookmark(w->res));
          break;
        }
        auto until = w->deadline;
        if (w->bookmarks) until = std::min(until, w->next_bookmark);
        until = std::min(until, now + std::chrono::milliseconds(500));
        cv.wait_until(lock, until);
      }
    }
    if (!out.empty() && !sink.write(out.data(), out.size())) return false;
    if (end) sink.done();
    return true;
  }

  static Reply ValidatePod(const json& pod) {
    const json& spec = pod.contains("spec") ? pod["spec"] : json();
    std::string name = Str(pod, "metadata", "name");
    if (!spec.is_object() || !spec.contains("containers") || !spec["containers"].is_array() ||
        spec["containers"].empty()) {
      return Err(422, "Pod \"" + name + "\" is invalid: spec.containers: Required value",
                 "Invalid");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < spec["containers"].size(); ++i) {
      const json& c = spec["containers"][i];
      std::string at = "spec.containers[" + std::to_string(i) + "]";
      if (!c.is_object() || Str(c, "name").empty()) {
        return Err(422, "Pod \"" + name + "\" is invalid: " + at + ".name: Required value",
                   "Invalid");
      }
      if (!names.insert(Str(c, "name")).second) {
        return Err(422, "Pod \"" + name + "\" is invalid: " + at + ".name: Duplicate value",
                   "Invalid");
      }
      if (Str(c, "image").empty()) {
        return Err(422, "Pod \"" + name + "\" is invalid: " + at + ".image: Required value",
                   "Invalid");
      }
    }
    return {200, nullptr};
  }

  // What the real server checks of a Secret: data values are base64 (the JSON decoder of []byte
  // refuses anything else, 400), and a kubernetes.io/tls Secret holds tls.crt and tls.key.
  static Reply ValidateSecret(const json& s) {
    const std::string name = Str(s, "metadata", "name");
    const json data = s.contains("data") ? s["data"] : json::object();
    if (!data.is_null() && !data.is_object())
      return Err(400, "Secret.data: not an object", "BadRequest");
    static const std::string kAlphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (data.is_object()) {
      for (auto it = data.begin(); it != data.end(); ++it) {
        bool ok = it->is_string() && it->get<std::string>().size() % 4 == 0;
        if (ok) {
          const std::string v = it->get<std::string>();
          const size_t pad = v.find('=');
          for (size_t i = 0; i < v.size() && ok; ++i)
            ok = i < pad ? kAlphabet.find(v[i]) != std::string::npos
                         : v[i] == '=' && v.size() - pad <= 2;
        }
        if (!ok)
          return Err(400,
                     "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data "
                     "in data[" +
                         it.key() + "]",
                     "BadRequest");
      }
    }
    if (Str(s, "type") == "kubernetes.io/tls") {
      for (const char* k : {"tls.crt", "tls.key"})
        if (!data.is_object() || !data.contains(k))
          return Err(422, "Secret \"" + name + "\" is invalid: data[" + k + "]: Required value",
                     "Invalid");
    }
    return {200, nullptr};
  }

  Reply HandleCreate(const httplib::Request& req, Resource r, const std::string& ns) {
    Result<json> body = ParseBody(req);
    if (!body.ok()) return Err(400, body.status().message(), "BadRequest");
    json obj = std::move(*body);
    if (!obj.is_object()) return Err(400, "the request body must be an object", "BadRequest");
    std::string kind = Str(obj, "kind");
    if (!kind.empty() && kind != Info(r).kind) {
      return Err(400, "the kind \"" + kind + "\" does not match the resource " + Info(r).plural,
                 "BadRequest");
    }
    std::string obj_ns = Str(obj, "metadata", "namespace");
    if (Info(r).namespaced && !obj_ns.empty() && obj_ns != ns) {
      return Err(
          400,
          "the namespace of the provided object does not match the namespace sent on the request",
          "BadRequest");
    }
    if (Str(obj, "metadata", "name").empty() && Str(obj, "metadata", "generateName").empty()) {
      return Err(422,
                 std::string(Info(r).kind) +
                     " is invalid: metadata.name: Required value: name or generateName is required",
                 "Invalid");
    }
    if (!obj.contains("metadata") || !obj["metadata"].is_object()) obj["metadata"] = json::object();
    if (Info(r).namespaced) obj["metadata"]["namespace"] = ns;
    json& m = obj["metadata"];
    for (const char* k : {"uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                          "deletionGracePeriodSeconds"}) {
      m.erase(k);
    }
    if (r == Resource::kPods) {
      Reply v = ValidatePod(obj);
      if (v.code != 200) return v;
      obj["status"] = {{"phase", "Pending"}};
    }
    if (r == Resource::kSecrets) {
      if (Str(obj, "type").empty()) obj["type"] = "Opaque";
      if (Reply v = ValidateSecret(obj); v.code != 200) return v;
    }
    if (r == Resource::kEvents) {
      std::string io_ns = Str(obj, "involvedObject", "namespace");
      if (!io_ns.empty() && io_ns != ns) {
        return Err(422,
                   "Event \"" + Str(obj, "metadata", "name") +
                       "\" is invalid: involvedObject.namespace: Invalid value: \"" + io_ns +
                       "\": does not match event.namespace",
                   "Invalid");
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    obj = Prepare(r, std::move(obj));
    if (Str(obj, "metadata", "name").empty()) {
      std::string gen = Str(obj, "metadata", "generateName");
      do {
        obj["metadata"]["name"] = gen + RandomSuffix();
      } while (S(r).objects.count(Key(r, ns, Str(obj, "metadata", "name"))) != 0);
    }
    std::string name = Str(obj, "metadata", "name");
    std::string key = Key(r, ns, name);
    if (S(r).objects.count(key) != 0) {
      return Err(409, std::string(Info(r).plural) + " \"" + name + "\" already exists",
                 "AlreadyExists", json{{"name", name}, {"kind", Info(r).plural}});
    }
    return {201, Commit(r, key, std::move(obj), nullptr)};
  }

  // Applies an update `cand` (the full new object) to `old` for the main resource or status.
  // Returns the reply; commits when something changed.
  // `patch`: the candidate is a PATCH applied to `old` (else a PUT's body): a UID that differs
  // is then refused as the real API server refuses it, as an invalid change of an immutable
  // field (422), where a PUT's is a failed precondition (409).
  Reply ApplyUpdate(Resource r, const std::string& key, const json& old, json cand,
                    const std::string& sub, bool patch = false) {
    std::string name = Str(old, "metadata", "name");
    if (!cand.is_object()) return Err(422, "the result is not an object", "Invalid");
    if (!cand.contains("metadata") || !cand["metadata"].is_object())
      cand["metadata"] = json::object();
    std::string cand_name = Str(cand, "metadata", "name");
    if (!cand_name.empty() && cand_name != name) {
      return Err(400,
                 "the name of the object (" + cand_name + ") does not match the name on the URL (" +
                     name + ")",
                 "BadRequest");
    }
    std::string cand_ns = Str(cand, "metadata", "namespace");
    if (Info(r).namespaced && !cand_ns.empty() && cand_ns != Str(old, "metadata", "namespace")) {
      return Err(400, "the namespace of the object does not match the namespace on the URL",
                 "BadRequest");
    }
    std::string want_rv = Str(cand, "metadata", "resourceVersion");
    if (!want_rv.empty() && want_rv != Str(old, "metadata", "resourceVersion"))
      return Conflict(r, name);
    std::string want_uid = Str(cand, "metadata", "uid");
    if (patch && !want_uid.empty() && want_uid != Str(old, "metadata", "uid")) {
      return Err(422,
                 std::string(Info(r).kind) + " \"" + name +
                     "\" is invalid: metadata.uid: Invalid value: \"" + want_uid +
                     "\": field is immutable",
                 "Invalid");
    }
    if (!want_uid.empty() && want_uid != Str(old, "metadata", "uid")) {
      return Err(409,
                 "Precondition failed: UID in precondition: " + want_uid +
                     ", UID in object meta: " + Str(old, "metadata", "uid"),
                 "Conflict");
    }
    json& m = cand["metadata"];
    const json& om = old["metadata"];
    for (const char* k : {"name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                          "deletionGracePeriodSeconds", "resourceVersion"}) {
      CopyField(m, om, k);
    }
    cand["kind"] = Info(r).kind;
    cand["apiVersion"] = Info(r).group_version;
    if (r == Resource::kSecrets) {
      if (Str(cand, "type") != Str(old, "type"))
        return Err(422,
                   "Secret \"" + name + "\" is invalid: type: Invalid value: \"" +
                       Str(cand, "type") + "\": field is immutable",
                   "Invalid");
      if (Reply v = ValidateSecret(cand); v.code != 200) return v;
    }
    if (sub == "status") {
      CopyField(cand, old, "spec");
      if (r == Resource::kPods) CopyField(m, om, "ownerReferences");
    } else if (r != Resource::kEvents) {
      CopyField(cand, old, "status");
      if (r == Resource::kPods) {
        const json& os = old.contains("spec") ? old["spec"] : json();
        const json& ns = cand.contains("spec") ? cand["spec"] : json();
        if (!PodSpecChangeAllowed(os, ns)) {
          return Err(
              422,
              "Pod \"" + name +
                  "\" is invalid: spec: Forbidden: pod updates may not change fields other than "
                  "`spec.containers[*].image`, `spec.initContainers[*].image`, "
                  "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing "
                  "tolerations) or `spec.terminationGracePeriodSeconds`",
              "Invalid");
        }
      }
    }
    if (cand == old) return {200, old};  // a no-op does not bump the resourceVersion
    return {200, Commit(r, key, std::move(cand), old)};
  }

  Reply HandlePatch(const httplib::Request& req, Resource r, const std::string& ns,
                    const std::string& name, const std::string& sub) {
    std::string ctype = req.get_header_value("Content-Type");
    size_t semi = ctype.find(';');
    if (semi != std::string::npos) ctype = ctype.substr(0, semi);
    bool merge = ctype == "application/merge-patch+json";
    bool jsonpatch = ctype == "application/json-patch+json";
    if (!merge && !jsonpatch) {
      return Err(415,
                 "the body of the request was in an unknown format - accepted media types include: "
                 "application/json-patch+json, application/merge-patch+json (this double does not "
                 "implement " +
                     (ctype.empty() ? std::string("an empty content type") : ctype) + ")",
                 "UnsupportedMediaType");
    }
    Result<json> patch = ParseBody(req);
    if (!patch.ok()) return Err(400, patch.status().message(), "BadRequest");
    std::lock_guard<std::mutex> lock(mu);
    std::string key = Key(r, ns, name);
    auto it = S(r).objects.find(key);
    if (it == S(r).objects.end()) return NotFound(r, name);
    json old = it->second;
    json cand = old;
    if (merge) {
      if (!patch->is_object()) return Err(400, "a merge patch must be a JSON object", "BadRequest");
      // The patch's resourceVersion is a precondition (409 when stale); a uid other than the
      // stored one is refused as an immutable field (422), as the real API server does.
      cand.merge_patch(*patch);
      if (!patch->contains("metadata") || !(*patch)["metadata"].is_object() ||
          !(*patch)["metadata"].contains("resourceVersion")) {
        cand["metadata"].erase("resourceVersion");
      }
      if (!patch->contains("metadata") || !(*patch)["metadata"].is_object() ||
          !(*patch)["metadata"].contains("uid")) {
        cand["metadata"].erase("uid");
      }
    } else {
      try {
        cand = old.patch(*patch);
      } catch (const std::exception& e) {
        return Err(422, std::string("the JSON patch could not be applied: ") + e.what(), "Invalid");
      }
      // JSON patch has its own "test" op for preconditions; the stored values stay authoritative.
      if (cand.is_object() && cand.contains("metadata") && cand["metadata"].is_object()) {
        cand["metadata"].erase("resourceVersion");
        cand["metadata"].erase("uid");
      }
    }
    return ApplyUpdate(r, key, old, std::move(cand), sub, /*patch=*/true);
  }

  Reply HandlePut(const httplib::Request& req, Resource r, const std::string& ns,
                  const std::string& name, const std::string& sub) {
    Result<json> body = ParseBody(req);
    if (!body.ok()) return Err(400, body.status().message(), "BadRequest");
    std::lock_guard<std::mutex> lock(mu);
    std::string key = Key(r, ns, name);
    auto it = S(r).objects.find(key);
    if (it == S(r).objects.end()) return NotFound(r, name);
    return ApplyUpdate(r, key, it->second, std::move(*body), sub);
  }

  Reply HandleDelete(const httplib::Request& req, Resource r, const std::string& ns,
                     const std::string& name) {
    json opts = json::object();
    if (!req.body.empty()) {
      Result<json> b = ParseBody(req);
      if (!b.ok()) return Err(400, b.status().message(), "BadRequest");
      if (b->is_object()) opts = std::move(*b);
    }
    std::optional<int64_t> grace;
    if (opts.contains("gracePeriodSeconds") && opts["gracePeriodSeconds"].is_number_integer()) {
      grace = opts["gracePeriodSeconds"].get<int64_t>();
    }
    if (req.has_param("gracePeriodSeconds")) {
      std::optional<uint64_t> g = ParseRv(req.get_param_value("gracePeriodSeconds"));
      if (!g) return Err(400, "gracePeriodSeconds: invalid value", "BadRequest");
      grace = static_cast<int64_t>(*g);
    }
    std::lock_guard<std::mutex> lock(mu);
    std::string key = Key(r, ns, name);
    auto it = S(r).objects.find(key);
    if (it == S(r).objects.end()) return NotFound(r, name);
    json old = it->second;
    if (opts.contains("preconditions") && opts["preconditions"].is_object()) {
      std::string uid = Str(opts["preconditions"], "uid");
      std::string prv = Str(opts["preconditions"], "resourceVersion");
      if (!uid.empty() && uid != Str(old, "metadata", "uid")) {
        return Err(409,
                   "Precondition failed: UID in precondition: " + uid +
                       ", UID in object meta: " + Str(old, "metadata", "uid"),
                   "Conflict");
      }
      if (!prv.empty() && prv != Str(old, "metadata", "resourceVersion")) return Conflict(r, name);
    }
    if (r == Resource::kPods) {
      std::string phase = Str(old, "status", "phase");
      bool bound = !Str(old, "spec", "nodeName").empty();
      bool finished = phase == "Succeeded" || phase == "Failed";
      int64_t g = grace.value_or(-1);
      if (g < 0) {
        g = 30;
        if (old.contains("spec") && old["spec"].is_object() &&
            old["spec"].contains("terminationGracePeriodSeconds") &&
            old["spec"]["terminationGracePeriodSeconds"].is_number_integer()) {
          g = old["spec"]["terminationGracePeriodSeconds"].get<int64_t>();
        }
      }
      if (bound && !finished && g > 0) {
        // Graceful: the kubelet finishes the deletion (with gracePeriodSeconds=0).
        if (old["metadata"].contains("deletionTimestamp")) return {200, old};
        json cand = old;
        cand["metadata"]["deletionTimestamp"] = NowPlus(g);
        cand["metadata"]["deletionGracePeriodSeconds"] = g;
        return {200, Commit(r, key, std::move(cand), old)};
      }
    }
    return {200, Commit(r, key, nullptr, old)};
  }

  Reply HandleBinding(const httplib::Request& req, const std::string& ns,
                      const std::string& url_name) {
    Result<json> body = ParseBody(req);
    if (!body.ok()) return Err(400, body.status().message(), "BadRequest");
    const json& b = *body;
    if (!b.is_object()) return Err(400, "the request body must be an object", "BadRequest");
    std::string kind = Str(b, "kind");
    if (!kind.empty() && kind != "Binding") {
      return Err(400, "the kind \"" + kind + "\" is not Binding", "BadRequest");
    }
    std::string name = Str(b, "metadata", "name");
    if (!url_name.empty() && !name.empty() && name != url_name) {
      return Err(400, "name in URL does not match name in Binding object", "BadRequest");
    }
    if (name.empty()) name = url_name;
    if (name.empty())
      return Err(422, "Binding is invalid: metadata.name: Required value", "Invalid");
    std::string bns = Str(b, "metadata", "namespace");
    if (!bns.empty() && bns != ns) {
      return Err(
          400,
          "the namespace of the provided object does not match the namespace sent on the request",
          "BadRequest");
    }
    std::string tkind = Str(b, "target", "kind");
    std::string node = Str(b, "target", "name");
    if (!tkind.empty() && tkind != "Node") {
      return Err(422,
                 "Binding \"" + name + "\" is invalid: target.kind: Invalid value: \"" + tkind +
                     "\": must be empty or 'Node'",
                 "Invalid");
    }
    if (node.empty())
      return Err(422, "Binding \"" + name + "\" is invalid: target.name: Required value",
                 "Invalid");
    std::lock_guard<std::mutex> lock(mu);
    std::string key = Key(Resource::kPods, ns, name);
    auto it = S(Resource::kPods).objects.find(key);
    if (it == S(Resource::kPods).objects.end()) return NotFound(Resource::kPods, name);
    json old = it->second;
    std::string uid = Str(b, "metadata", "uid");
    if (!uid.empty() && uid != Str(old, "metadata", "uid")) {
      return Err(409,
                 "Precondition failed: UID in precondition: " + uid +
                     ", UID in object meta: " + Str(old, "metadata", "uid"),
                 "Conflict");
    }
    if (old["metadata"].contains("deletionTimestamp")) {
      return Err(409, "pod " + name + " is being deleted, cannot be assigned to a host",
                 "Conflict");
    }
    std::string current = Str(old, "spec", "nodeName");
    if (!current.empty()) {
      return Err(409, "pod " + name + " is already assigned to node \"" + current + "\"",
                 "Conflict");
    }
    json pod = old;
    pod["spec"]["nodeName"] = node;
    if (b.contains("metadata") && b["metadata"].is_object() &&
        b["metadata"].contains("annotations") && b["metadata"]["annotations"].is_object()) {
      for (auto a = b["metadata"]["annotations"].begin(); a != b["metadata"]["annotations"].end();
           ++a) {
        pod["metadata"]["annotations"][a.key()] = *a;
      }
    }
    if (!pod.contains("status") || !pod["status"].is_object()) pod["status"] = json::object();
    json conds = pod["status"].value("conditions", json::array());
    if (!conds.is_array()) conds = json::array();
    json cond = {{"type", "PodScheduled"},
                 {"status", "True"},
                 {"lastProbeTime", nullptr},
                 {"lastTransitionTime", Now()}};
    bool replaced = false;
    for (json& c : conds) {
      if (c.is_object() && Str(c, "type") == "PodScheduled") {
        c = cond;
        replaced = true;
      }
    }
    if (!replaced) conds.push_back(cond);
    pod["status"]["conditions"] = conds;
    Commit(Resource::kPods, key, std::move(pod), old);
    return {201,
            {{"kind", "Status"},
             {"apiVersion", "v1"},
             {"metadata", json::object()},
             {"status", "Success"},
             {"code", 201}}};
  }

  // ---- TokenReview and SubjectAccessReview (create-only, nothing stored) ----

  Reply HandleTokenReview(const httplib::Request& req) {
    Result<json> body = ParseBody(req);
    if (!body.ok()) return Err(400, body.status().message(), "BadRequest");
    if (!body->is_object() || Str(*body, "kind") != "TokenReview")
      return Err(400, "the request body must be a TokenReview", "BadRequest");
    const json spec = body->value("spec", json::object());
    const std::string token = spec.is_object() ? spec.value("token", std::string()) : "";
    if (token.empty())
      return Err(400, "token is required for TokenReview in authentication", "BadRequest");
    json status = {{"authenticated", false}, {"user", json::object()}};
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = identities.find(token);
      if (it != identities.end()) {
        status = {{"authenticated", true},
                  {"user",
                   {{"username", it->second.username},
                    {"uid", it->second.uid},
                    {"groups", it->second.groups}}},
                  {"audiences", json::array({"https://kubernetes.default.svc"})}};
      }
    }
    json out = *body;
    out["apiVersion"] = "authentication.k8s.io/v1";
    out["metadata"] = {{"creationTimestamp", nullptr}};
    out["status"] = status;
    return {201, out};
  }

  static bool PathMatches(const std::string& rule, const std::string& path) {
    if (!rule.empty() && rule.back() == '*')
      return path.compare(0, rule.size() - 1, rule, 0, rule.size() - 1) == 0;
    return rule == path;
  }

  Reply HandleAccessReview(const httplib::Request& req) {
    Result<json> body = ParseBody(req);
    if (!body.ok()) return Err(400, body.status().message(), "BadRequest");
    if (!body->is_object() || Str(*body, "kind") != "SubjectAccessReview")
      return Err(400, "the request body must be a SubjectAccessReview", "BadRequest");
    const json spec = body->value("spec", json::object());
    if (!spec.is_object()) return Err(400, "spec must be an object", "BadRequest");
    const std::string user = spec.value("user", std::string());
    std::vector<std::string> groups;
    if (spec.contains("groups") && spec["groups"].is_array())
      for (const json& g : spec["groups"])
        if (g.is_string()) groups.push_back(g.get<std::string>());
    const bool has_resource = spec.contains("resourceAttributes");
    const bool has_non_resource = spec.contains("nonResourceAttributes");
    if (user.empty() && groups.empty())
      return Err(422,
                 "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.user: Invalid "
                 "value: \"\": at least one of user or group must be specified",
                 "Invalid");
    if (has_resource == has_non_resource)
      return Err(422,
                 "SubjectAccessReview.authorization.k8s.io \"\" is invalid: "
                 "spec.resourceAttributes: Invalid value: \"null\": exactly one of "
                 "nonResourceAttributes or resourceAttributes must be specified",
                 "Invalid");
    bool allowed = false;
    std::string reason;
    if (has_non_resource) {
      const json a = spec["nonResourceAttributes"];
      const std::string path = a.is_object() ? a.value("path", std::string()) : "";
      const std::string verb = a.is_object() ? a.value("verb", std::string()) : "";
      std::lock_guard<std::mutex> lock(mu);
      for (const NonResourceGrant& g : grants) {
        bool who = g.subject == user;
        for (const std::string& grp : groups) who = who || g.subject == "group:" + grp;
        if (who && PathMatches(g.path, path) && (g.verb == "*" || g.verb == verb)) {
          allowed = true;
          reason = "RBAC: allowed by the fake's grant to " + g.subject;
          break;
        }
      }
    }
    json out = *body;
    out["apiVersion"] = "authorization.k8s.io/v1";
    out["metadata"] = {{"creationTimestamp", nullptr}};
    out["status"] = {{"allowed", allowed}};
    if (!reason.empty()) out["status"]["reason"] = reason;
    return {201, out};
  }

  // ---- the /_fake/ hooks (standalone binary) ----

  Reply HandleTestHook(const httplib::Request& req, const std::vector<std::string>& seg) {
    std::string what = seg.size() > 1 ? seg[1] : "";
    const std::string& m = req.method;
    if (what == "objects" && m == "POST") {
      Result<json> body = ParseBody(req);
      if (!body.ok() || !body->is_object())
        return Err(400, "want an object or {\"items\": [...]}", "BadRequest");
      std::vector<json> objs;
      if (body->contains("items") && (*body)["items"].is_array()) {
        for (const json& o : (*body)["items"]) objs.push_back(o);
      } else {
        objs.push_back(*body);
      }
      json stored = json::array();
      for (const json& o : objs) {
        std::optional<Resource> r = ResourceFromKind(Str(o, "kind"));
        if (!r) return Err(400, "object without a supported kind (Pod, Node, Event)", "BadRequest");
        std::lock_guard<std::mutex> lock(mu);
        stored.push_back(UpsertLocked(*r, o));
      }
      return {200, {{"items", stored}}};
    }
    if (what == "objects" && m == "DELETE" && seg.size() >= 4) {
      std::optional<Resource> r = ResourceFromName(seg[2]);
      if (!r) return Err(400, "unknown resource " + seg[2], "BadRequest");
      std::string ns = seg.size() >= 5 ? seg[3] : "";
      std::string name = seg.size() >= 5 ? seg[4] : seg[3];
      std::lock_guard<std::mutex> lock(mu);
      std::string key = Key(*r, ns, name);
      auto it = S(*r).objects.find(key);
      if (it == S(*r).objects.end()) return NotFound(*r, name);
      json old = it->second;
      Commit(*r, key, nullptr, old);
      return {200, old};
    }
    if (what == "identities" && m == "POST") {
      Result<json> body = ParseBody(req);
      if (!body.ok() || !body->is_object() || Str(*body, "token").empty())
        return Err(400, "want {\"token\", \"username\", \"uid\", \"groups\"}", "BadRequest");
      FakeIdentity id{
          body->value("username", std::string()), body->value("uid", std::string()), {}};
      if (body->contains("groups") && (*body)["groups"].is_array())
        for (const json& g : (*body)["groups"])
          if (g.is_string()) id.groups.push_back(g.get<std::string>());
      std::lock_guard<std::mutex> lock(mu);
      identities[Str(*body, "token")] = id;
      return {200, *body};
    }
    if (what == "grants" && m == "POST") {
      Result<json> body = ParseBody(req);
      if (!body.ok() || !body->is_object())
        return Err(400, "want {\"subject\", \"path\", \"verb\"}", "BadRequest");
      std::lock_guard<std::mutex> lock(mu);
      grants.push_back({body->value("subject", std::string()), body->value("path", std::string()),
                        body->value("verb", std::string())});
      return {200, *body};
    }
    if (what == "faults" && m == "POST") {
      Result<json> body = ParseBody(req);
      if (!body.ok() || !body->is_object()) return Err(400, "want a fault object", "BadRequest");
      const json& f = *body;
      Fault fault;
      std::string kind = f.value("kind", "http");
      if (kind == "http") {
        fault.kind = Fault::Kind::kHttpError;
      } else if (kind == "drop") {
        fault.kind = Fault::Kind::kDropConnection;
      } else if (kind == "delay") {
        fault.kind = Fault::Kind::kDelay;
      } else {
        return Err(400, "kind: want http, drop or delay", "BadRequest");
      }
      fault.count = f.value("count", 1);
      fault.http_code = f.value("code", 500);
      fault.reason = f.value("reason", "");
      fault.message = f.value("message", "injected fault");
      fault.method = f.value("method", "");
      fault.path_contains = f.value("pathContains", "");
      fault.watch = f.value("watch", -1);
      fault.delay = std::chrono::milliseconds(f.value("delayMs", 0));
      std::lock_guard<std::mutex> lock(mu);
      faults.push_back(fault);
      return {200, {{"faults", faults.size()}}};
    }
    if (what == "faults" && m == "DELETE") {
      std::lock_guard<std::mutex> lock(mu);
      faults.clear();
      return {200, json::object()};
    }
    if (what == "requests" && m == "GET") {
      std::lock_guard<std::mutex> lock(mu);
      json out = json::array();
      for (const RecordedRequest& r : log) {
        out.push_back({{"method", r.method},
                       {"path", r.path},
                       {"query", r.query},
                       {"watch", r.watch},
                       {"status", r.status}});
      }
      return {200, {{"requests", out}}};
    }
    if (what == "requests" && m == "DELETE") {
      std::lock_guard<std::mutex> lock(mu);
      log.clear();
      return {200, json::object()};
    }
    if (what == "compact" && m == "POST") {
      CompactAll();
      return {200, json::object()};
    }
    if (what == "close-watches" && m == "POST") {
      std::string mode = req.get_param_value("mode");
      CloseAll(mode == "gone"   ? CloseMode::kGone
               : mode == "drop" ? CloseMode::kDrop
                                : CloseMode::kClean);
      return {200, json::object()};
    }
    if (what == "bookmarks" && m == "POST") {
      BookmarkAll();
      return {200, json::object()};
    }
    if (what == "state" && m == "GET") {
      std::lock_guard<std::mutex> lock(mu);
      return {200, {{"resourceVersion", std::to_string(rv)}, {"openWatches", watchers.size()}}};
    }
    return Err(404, "unknown test hook", "NotFound");
  }

  void CompactAll() {
    std::lock_guard<std::mutex> lock(mu);
    for (Store& s : stores) {
      s.history.clear();
      s.window_start = rv;
    }
  }

  void CloseAll(CloseMode mode) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& w : watchers) {
      w->closing = true;
      w->close_mode = mode;
    }
    cv.notify_all();
  }

  void BookmarkAll() {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& w : watchers) w->bookmark_now = true;
    cv.notify_all();
  }
};

// ---------------------------------------------------------------------------------------------

FakeApiServer::FakeApiServer(FakeApiServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

FakeApiServer::~FakeApiServer() {
  Stop();
}

Status FakeApiServer::Start() {
  Impl& d = *impl_;
  if (d.server) return Status::FailedPrecondition("fake API server already started");
  d.stopping.store(false);
  if (!d.opt.tls_cert_file.empty() || !d.opt.tls_key_file.empty()) {
    auto ssl = std::make_unique<httplib::SSLServer>(
        d.opt.tls_cert_file.c_str(), d.opt.tls_key_file.c_str(),
        d.opt.tls_client_ca_file.empty() ? nullptr : d.opt.tls_client_ca_file.c_str());
    if (!ssl->is_valid()) {
      return Status::InvalidArgument("fake API server: cannot load TLS certificate " +
                                     d.opt.tls_cert_file + " / key " + d.opt.tls_key_file);
    }
    d.server = std::move(ssl);
    d.https = true;
  } else {
    d.server = std::make_unique<httplib::Server>();
  }
  size_t threads = std::max<size_t>(4, d.opt.threads);
  d.server->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  d.server->set_tcp_nodelay(true);  // headers and body go out in separate writes
  d.server->set_keep_alive_timeout(1);
  d.server->set_keep_alive_max_count(1000);
  d.server->set_payload_max_length(d.opt.max_request_bytes);
  d.server->set_read_timeout(10, 0);
  d.server->set_write_timeout(10, 0);
  auto handler = [&d](const httplib::Request& req, httplib::Response& res) {
    try {
      d.Handle(req, res);
    } catch (const std::exception& e) {
      res.status = 500;
      res.set_content(
          StatusJson(500, "InternalError", std::string("fake API server: ") + e.what()).dump(),
          "application/json");
    }
  };
  d.server->Get(".*", handler);
  d.server->Post(".*", handler);
  d.server->Put(".*", handler);
  d.server->Patch(".*", handler);
  d.server->Delete(".*", handler);
  if (d.opt.port == 0) {
    d.port = d.server->bind_to_any_port(d.opt.host);
  } else {
    d.port = d.server->bind_to_port(d.opt.host, d.opt.port) ? d.opt.port : -1;
  }
  if (d.port <= 0) {
    d.server.reset();
    return Status::Unavailable("fake API server: cannot listen on " + d.opt.host + ":" +
                               std::to_string(d.opt.port));
  }
  d.listen_done.store(false);
  d.listen_thread = std::thread([&d] {
    d.server->listen_after_bind();
    d.listen_done.store(true);
  });
  // Stop() only takes effect once the accept loop runs, so wait for it.
  while (!d.server->is_running() && !d.listen_done.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::Ok();
}

void FakeApiServer::Stop() {
  Impl& d = *impl_;
  if (!d.server) return;
  d.stopping.store(true);
  {
    std::lock_guard<std::mutex> lock(d.mu);
    d.cv.notify_all();
  }
  d.server->stop();
  if (d.listen_thread.joinable()) d.listen_thread.join();
  d.server.reset();
}

int FakeApiServer::port() const {
  return impl_->port;
}

std::string FakeApiServer::url() const {
  return std::string(impl_->https ? "https" : "http") + "://" + impl_->opt.host + ":" +
         std::to_string(impl_->port);
}

nlohmann::json FakeApiServer::Upsert(Resource r, nlohmann::json object) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->UpsertLocked(r, std::move(object));
}

bool FakeApiServer::Remove(Resource r, std::string_view ns, std::string_view name) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::string key = Impl::Key(r, ns, name);
  auto& objs = impl_->S(r).objects;
  auto it = objs.find(key);
  if (it == objs.end()) return false;
  json old = it->second;
  impl_->Commit(r, key, nullptr, old);
  return true;
}

std::optional<nlohmann::json> FakeApiServer::Get(Resource r, std::string_view ns,
                                                 std::string_view name) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const auto& objs = impl_->S(r).objects;
  auto it = objs.find(Impl::Key(r, ns, name));
  if (it == objs.end()) return std::nullopt;
  return it->second;
}

std::vector<nlohmann::json> FakeApiServer::List(Resource r) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<nlohmann::json> out;
  for (const auto& [k, v] : impl_->S(r).objects) out.push_back(v);
  return out;
}

uint64_t FakeApiServer::resource_version() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->rv;
}

void FakeApiServer::Compact() {
  impl_->CompactAll();
}
void FakeApiServer::CloseWatches(CloseMode mode) {
  impl_->CloseAll(mode);
}
void FakeApiServer::SendBookmarks() {
  impl_->BookmarkAll();
}

void FakeApiServer::HoldWatchEvents(bool hold) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->hold_events = hold;
  impl_->cv.notify_all();
}

size_t FakeApiServer::open_watches() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->watchers.size();
}

void FakeApiServer::SetIdentity(std::string token, FakeIdentity identity) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->identities[std::move(token)] = std::move(identity);
}

void FakeApiServer::Grant(NonResourceGrant grant) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->grants.push_back(std::move(grant));
}

void FakeApiServer::SetTokens(std::vector<std::string> tokens) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->tokens = std::move(tokens);
}

void FakeApiServer::InjectFault(Fault fault) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (fault.count > 0) impl_->faults.push_back(std::move(fault));
}

void FakeApiServer::SetFaults(std::vector<Fault> faults) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->faults.clear();
  for (Fault& f : faults) {
    if (f.count > 0) impl_->faults.push_back(std::move(f));
  }
}

void FakeApiServer::ClearFaults() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->faults.clear();
}

std::vector<RecordedRequest> FakeApiServer::requests() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->log;
}

size_t FakeApiServer::CountRequests(std::string_view method, std::string_view path_contains,
                                    int watch) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  size_t n = 0;
  for (const RecordedRequest& r : impl_->log) {
    if (!method.empty() && r.method != method) continue;
    if (!path_contains.empty() && r.path.find(path_contains) == std::string::npos) continue;
    if (watch == 0 && r.watch) continue;
    if (watch == 1 && !r.watch) continue;
    ++n;
  }
  return n;
}

void FakeApiServer::ClearRequests() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->log.clear();
}

}  // namespace gpushare::fakes
