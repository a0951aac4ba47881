#include "scheduler/webhook.h"

#include "core/gpu_selector.h"
#include "core/hami_spec.h"
#include "core/memshare.h"
#include "kube/base64.h"
#include "kube/memshare_pod.h"
#include "kube/objects.h"
#include "kube/quantity.h"
#include "scheduler/wire.h"

namespace gpushare::scheduler {

using nlohmann::json;

namespace {

// The string member `key` of `obj`, "" when absent or not a string.
std::string Text(const json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

const json* Member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// A quantity above zero in the resource list `list` (requests or limits) under `resource`.
bool Positive(const json* list, std::string_view resource) {
  if (list == nullptr || !list->is_object()) return false;
  auto it = list->find(std::string(resource));
  if (it == list->end()) return false;
  std::string text;
  if (it->is_string()) {
    text = it->get<std::string>();
  } else if (it->is_number_integer() || it->is_number_unsigned() || it->is_number_float()) {
    text = it->dump();  // (Go's Quantity also decodes a bare JSON number)
  } else {
    return false;
  }
  Result<kube::Quantity> q = kube::Quantity::Parse(text);
  return q.ok() && !q->IsZero() && !q->IsNegative();
}

WebhookReply Invalid(std::string why) {
  WebhookReply r;
  r.outcome = WebhookOutcome::kInvalid;
  r.http.code = 400;
  r.http.body = EncodeError("AdmissionReview: " + why);
  r.why = std::move(why);
  return r;
}

// Why a GPU choice's nvidia.com/use-gputype must be refused ("" when it may stand): a model no
// GPU of the cluster has, when the cluster's models are known.
std::string UnknownModelRefusal(const std::vector<std::string>& use_types,
                                const WebhookOptions& o) {
  if (use_types.empty() || !o.gpu_models) return "";
  const std::vector<std::string> models = o.gpu_models();
  if (models.empty()) return "";
  const std::vector<std::string> unknown =
      UnknownModels(GpuSelector{use_types, {}, {}, {}}, models);
  if (unknown.empty()) return "";
  std::string names, known;
  for (const std::string& u : unknown) names += (names.empty() ? "\"" : ", \"") + u + "\"";
  for (const std::string& m : models) known += (known.empty() ? "" : ", ") + m;
  return "metadata.annotations[" + std::string(kUseGpuTypeAnnotation) + "]: " + names +
         " matches no GPU model of the cluster (" + known + ")";
}

// Why a pod asking for shares must not be created ("" when it may): its request, its GPU
// choice, a model no GPU of the cluster has. Messages name the field.
std::string Refusal(const json& pod, const WebhookOptions& o) {
  Result<kube::Pod> decoded = kube::DecodePod(pod);
  if (!decoded.ok()) return "";  // the API server's own validation says what is wrong
  Result<memshare::PodRequest> req = kube::PodPlacementRequest(*decoded, o.resource_name);
  if (!req.ok()) return req.status().message();
  return UnknownModelRefusal(req->selector.use_types, o);
}

// Why the GPU choice of a pod that asks no shares (time-slices, MIG devices, whole GPUs, which
// gpushare-node's preferred allocation steers) must not be created: a malformed annotation, or
// a model no GPU of the cluster has.
std::string ChoiceRefusal(const json& pod, const WebhookOptions& o) {
  Result<kube::Pod> decoded = kube::DecodePod(pod);
  if (!decoded.ok()) return "";
  Result<GpuSelector> s = ParseGpuSelector(decoded->metadata.annotations);
  if (!s.ok()) return s.status().message();
  return UnknownModelRefusal(s->use_types, o);
}

// The quantity text of `name` in a resource list, or nullopt when absent (a bare JSON number is a
// quantity too, as Go's decoder has it).
std::optional<std::string> QuantityText(const json* list, std::string_view name) {
  if (list == nullptr || !list->is_object()) return std::nullopt;
  auto it = list->find(std::string(name));
  if (it == list->end()) return std::nullopt;
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// One of HAMi's resources of a container: the limit, else the request, as a whole number.
Status HamiAsk(const json& resources, std::string_view name, const std::string& path,
               std::optional<int64_t>* out) {
  for (const char* list : {"limits", "requests"}) {
    std::optional<std::string> text = QuantityText(Member(resources, list), name);
    if (!text) continue;
    GPUSHARE_ASSIGN_OR_RETURN(
        int64_t v,
        kube::ParseWholeQuantity(*text, path + "." + list + "[" + std::string(name) + "]"));
    *out = v;
    return Status::Ok();
  }
  return Status::Ok();
}

// RFC 6901: "~" and "/" of a member name escaped for a JSON pointer.
std::string PointerToken(std::string_view name) {
  std::string out;
  for (char c : name) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

// HAMi's containers of `pod` rewritten into gpushare's resources (core/hami_spec.h): the JSON
// patch operations (each rewritten container's resources replaced, and the annotation naming
// what they asked), applied to `*pod` too. No operations when no container is HAMi's.
Result<json> RewriteHami(json* pod, const WebhookOptions& o) {
  json ops = json::array();
  json original = json::object();
  json* spec = pod->contains("spec") ? &(*pod)["spec"] : nullptr;
  for (const char* list : {"initContainers", "containers"}) {
    if (spec == nullptr || !spec->contains(list) || !(*spec)[list].is_array()) continue;
    json& cs = (*spec)[list];
    for (size_t i = 0; i < cs.size(); ++i) {
      json& c = cs[i];
      const json* res = Member(c, "resources");
      if (res == nullptr || !res->is_object()) continue;
      const std::string path =
          "spec." + std::string(list) + "[" + std::to_string(i) + "].resources";
      hami::ContainerAsk ask;
      ask.name = Text(c, "name");
      ask.init = std::string_view(list) == "initContainers";
      GPUSHARE_RETURN_IF_ERROR(HamiAsk(*res, hami::kGpu, path, &ask.gpus));
      GPUSHARE_RETURN_IF_ERROR(HamiAsk(*res, hami::kGpuMem, path, &ask.mem_mib));
      GPUSHARE_RETURN_IF_ERROR(HamiAsk(*res, hami::kGpuMemPercentage, path, &ask.mem_percent));
      GPUSHARE_RETURN_IF_ERROR(HamiAsk(*res, hami::kGpuCores, path, &ask.cores));
      GPUSHARE_ASSIGN_OR_RETURN(std::optional<hami::Rewrite> rw,
                                hami::RewriteContainer(ask, o.unit, o.resource_name));
      if (!rw) continue;
      // What it asked, as whole numbers (the API server holds 3000 as "3k").
      json asked = json::object();
      const std::pair<std::string_view, const std::optional<int64_t>*> asks[] = {
          {hami::kGpu, &ask.gpus},
          {hami::kGpuMem, &ask.mem_mib},
          {hami::kGpuMemPercentage, &ask.mem_percent},
          {hami::kGpuCores, &ask.cores}};
      for (const auto& [name, value] : asks)
        if (value->has_value()) asked[std::string(name)] = std::to_string(**value);
      // HAMi's resources out (gpucores stays unless dropped), gpushare's in, requests equal to
      // limits as the API server's defaulting would make them.
      json updated = *res;
      for (const char* l : {"limits", "requests"}) {
        if (!updated.contains(l) || !updated[l].is_object()) continue;
        for (std::string_view name :
             {hami::kGpu, hami::kGpuMem, hami::kGpuMemPercentage, hami::kGpuCores})
          if (name != hami::kGpuCores || !rw->keep_cores) updated[l].erase(std::string(name));
      }
      for (const auto& [name, quantity] : rw->limits) {
        updated["limits"][name] = std::to_string(quantity);
        updated["requests"][name] = std::to_string(quantity);
      }
      original[ask.name] = asked;
      if (!rw->notes.empty()) {
        std::string notes;
        for (const std::string& n : rw->notes) notes += (notes.empty() ? "" : "; ") + n;
        original[ask.name]["notes"] = notes;
      }
      ops.push_back(
          {{"op", "add"},
           {"path", "/spec/" + std::string(list) + "/" + std::to_string(i) + "/resources"},
           {"value", updated}});
      c["resources"] = std::move(updated);
    }
  }
  if (ops.empty()) return ops;
  json& meta = (*pod)["metadata"];
  if (!meta.is_object()) meta = json::object();
  if (!meta.contains("annotations") || !meta["annotations"].is_object()) {
    ops.push_back({{"op", "add"}, {"path", "/metadata/annotations"}, {"value", json::object()}});
    meta["annotations"] = json::object();
  }
  const std::string key(hami::kOriginalAnnotation);
  ops.push_back({{"op", "add"},
                 {"path", "/metadata/annotations/" + PointerToken(key)},
                 {"value", original.dump()}});
  meta["annotations"][key] = original.dump();
  return ops;
}

}  // namespace

bool PodRequestsResource(const json& pod, std::string_view resource) {
  const json* spec = Member(pod, "spec");
  for (const char* list : {"containers", "initContainers"}) {
    const json* cs = spec == nullptr ? nullptr : Member(*spec, list);
    if (cs == nullptr || !cs->is_array()) continue;
    for (const json& c : *cs) {
      const json* res = Member(c, "resources");
      if (res == nullptr) continue;
      if (Positive(Member(*res, "requests"), resource) ||
          Positive(Member(*res, "limits"), resource))
        return true;
    }
  }
  return false;
}

WebhookReply MutatePods(std::string_view body, const WebhookOptions& o) {
  Result<json> parsed = ParseBody(body);
  if (!parsed.ok()) return Invalid(parsed.status().message());
  const json& review = *parsed;
  const std::string api_version = Text(review, "apiVersion");
  if (api_version != "admission.k8s.io/v1" && api_version != "admission.k8s.io/v1beta1")
    return Invalid("apiVersion must be admission.k8s.io/v1 (or v1beta1), got \"" + api_version +
                   "\"");
  if (Text(review, "kind") != "AdmissionReview")
    return Invalid("kind must be AdmissionReview, got \"" + Text(review, "kind") + "\"");
  const json* request = Member(review, "request");
  if (request == nullptr || !request->is_object())
    return Invalid("request: missing or not an object");
  const std::string uid = Text(*request, "uid");
  if (uid.empty()) return Invalid("request.uid: missing or not a string");

  WebhookReply r;
  r.outcome = WebhookOutcome::kUnchanged;
  json response = {{"uid", uid}, {"allowed", true}};
  const json* kind = Member(*request, "kind");
  const std::string operation = Text(*request, "operation");
  const bool pod_create = kind != nullptr && Text(*kind, "group").empty() &&
                          Text(*kind, "kind") == "Pod" && operation == "CREATE" &&
                          Text(*request, "subResource").empty();
  const std::string ns = Text(*request, "namespace");
  if (!pod_create) {
    r.why = "not a pod creation (" + (kind == nullptr ? std::string("?") : Text(*kind, "kind")) +
            " " + operation + ")";
  } else {
    const json* pod = Member(*request, "object");
    if (pod == nullptr || !pod->is_object())
      return Invalid("request.object: missing for the CREATE of a Pod");
    const json* meta = Member(*pod, "metadata");
    const std::string name = meta == nullptr ? "" : Text(*meta, "name");
    r.pod = ns + "/" +
            (!name.empty() ? name : (meta == nullptr ? "" : Text(*meta, "generateName")) + "*");
    const json* spec = Member(*pod, "spec");
    const std::string current = spec == nullptr ? "" : Text(*spec, "schedulerName");
    // HAMi's pods (--hami-resources) are rewritten into gpushare's resources first, unless
    // another scheduler than the default or HAMi's is the user's choice.
    const bool hami_scheduler = o.hami_resources && current == kHamiSchedulerName;
    json effective;  // the pod as rewritten (only with --hami-resources)
    json ops = json::array();
    std::string why;
    if (o.hami_resources && (current.empty() || current == "default-scheduler" || hami_scheduler)) {
      effective = *pod;
      Result<json> rewritten = RewriteHami(&effective, o);
      if (!rewritten.ok()) {
        why = "pod " + r.pod + ": " + rewritten.status().message();
      } else if (!rewritten->empty()) {
        ops = std::move(*rewritten);
        pod = &effective;
      }
    }
    const bool shares = PodRequestsResource(*pod, o.resource_name) ||
                        PodRequestsResource(*pod, memshare::kMilliResource);
    if (!why.empty()) {
      // refused below
    } else if (!shares && PodRequestsResource(*pod, memshare::kCoreResource)) {
      // ACK's compute share alone: refused here rather than placed as if it were not asked.
      // (HAMi's nvidia.com/gpucores beside nvidia.com/gpu is HAMi's pod, not refused.)
      why = std::string(memshare::kCoreResource) + " needs a memory share in the same container (" +
            o.resource_name + ", or a fraction of " + std::string(memshare::kMilliResource) +
            "), and this pod asks none";
    } else if (shares) {
      why = Refusal(*pod, o);
    } else {
      why = ChoiceRefusal(*pod, o);  // the pod reached us for its GPU choice alone
    }
    if (!shares && why.empty()) {
      r.why =
          "does not request " + o.resource_name + " or " + std::string(memshare::kMilliResource);
    } else if (!why.empty()) {
      response["allowed"] = false;
      response["status"] = {{"code", 400}, {"reason", "BadRequest"}, {"message", why}};
      r.outcome = WebhookOutcome::kDenied;
      r.why = std::move(why);
    } else if (!current.empty() && current != "default-scheduler" && !hami_scheduler) {
      r.why = "schedulerName \"" + current + "\" chosen by the user";
    } else {
      // "add" on an object member replaces it when present (RFC 6902 §4.1).
      json patch = std::move(ops);
      patch.push_back(
          {{"op", "add"}, {"path", "/spec/schedulerName"}, {"value", o.scheduler_name}});
      response["patchType"] = "JSONPatch";
      response["patch"] = kube::Base64Encode(patch.dump());
      r.outcome = WebhookOutcome::kMutated;
    }
  }
  r.http.code = 200;
  r.http.body =
      json{{"apiVersion", api_version}, {"kind", "AdmissionReview"}, {"response", response}}.dump();
  return r;
}

}  // namespace gpushare::scheduler
