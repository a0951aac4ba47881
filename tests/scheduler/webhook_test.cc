// The webhook's pure parts: the AdmissionReview decision (MutatePods) and the certificate
// lifecycle (DecideCert with a fake clock, IssueCertificates / InspectCertificates).
#include "scheduler/webhook.h"

#include <gtest/gtest.h>

#include "kube/base64.h"
#include "scheduler/webhook_cert.h"

namespace gpushare::scheduler {
namespace {

using nlohmann::json;

json Container(const std::string& name, json requests, json limits = nullptr) {
  json c = {{"name", name}, {"image", "busybox"}};
  if (!requests.is_null()) c["resources"]["requests"] = requests;
  if (!limits.is_null()) c["resources"]["limits"] = limits;
  return c;
}

json Review(json pod, const std::string& operation = "CREATE", const std::string& kind = "Pod") {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
            {"kind", {{"group", ""}, {"version", "v1"}, {"kind", kind}}},
            {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
            {"namespace", "team-a"},
            {"operation", operation},
            {"object", pod}}}};
}

json PodWith(json containers, std::string scheduler = "", json init = nullptr) {
  json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", "p"}, {"namespace", "team-a"}}},
            {"spec", {{"containers", containers}}}};
  if (!scheduler.empty()) p["spec"]["schedulerName"] = scheduler;
  if (!init.is_null()) p["spec"]["initContainers"] = init;
  return p;
}

WebhookReply Mutate(const json& review) {
  return MutatePods(review.dump(), WebhookOptions{});
}

json Response(const WebhookReply& r) {
  EXPECT_EQ(r.http.code, 200) << r.http.body;
  json j = json::parse(r.http.body);
  EXPECT_EQ(j["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(j["kind"], "AdmissionReview");
  EXPECT_EQ(j["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(j["response"]["allowed"], true);
  return j["response"];
}

TEST(WebhookTest, APodRequestingTheResourceGetsTheSchedulerName) {
  for (const json& pod :
       {PodWith({Container("c", {{"aliyun.com/gpu-mem", "3"}})}),
        PodWith({Container("c", nullptr, {{"aliyun.com/gpu-mem", "2"}})}),
        PodWith(
            {Container("a", {{"cpu", "1"}}), Container("b", nullptr, {{"aliyun.com/gpu-mem", 1}})}),
        PodWith({Container("c", nullptr)}, "", {Container("i", {{"aliyun.com/gpu-mem", "1"}})}),
        PodWith({Container("c", {{"aliyun.com/gpu-mem", "3"}})}, "default-scheduler")}) {
    const WebhookReply r = Mutate(Review(pod));
    const json resp = Response(r);
    EXPECT_EQ(r.outcome, WebhookOutcome::kMutated);
    EXPECT_EQ(resp["patchType"], "JSONPatch");
    Result<std::string> patch = kube::Base64Decode(resp["patch"].get<std::string>());
    ASSERT_TRUE(patch.ok());
    EXPECT_EQ(
        json::parse(*patch),
        json::parse(R"([{"op":"add","path":"/spec/schedulerName","value":"gpushare-scheduler"}])"));
    // Applied, the patch gives the pod the scheduler (and replaces default-scheduler).
    EXPECT_EQ(pod.patch(json::parse(*patch))["spec"]["schedulerName"], "gpushare-scheduler");
  }
}

// Pods that ask for shares wrongly are refused at admission with the field named, never left
// to fail at kube-scheduler or kubelet: a bad fraction, two kinds of share in one pod, a
// malformed GPU choice, a model no GPU of the cluster has.
TEST(WebhookTest, BadRequestsAreDeniedNamingTheField) {
  WebhookOptions o;
  o.gpu_models = [] { return std::vector<std::string>{"NVIDIA A10", "NVIDIA A100-SXM4-80GB"}; };
  const auto deny = [&o](const json& pod) {
    WebhookReply r = MutatePods(Review(pod).dump(), o);
    EXPECT_EQ(r.outcome, WebhookOutcome::kDenied) << r.http.body;
    EXPECT_EQ(r.http.code, 200);
    const json j = json::parse(r.http.body);
    EXPECT_EQ(j["response"]["allowed"], false);
    EXPECT_EQ(j["response"]["status"]["code"], 400);
    EXPECT_FALSE(j["response"].contains("patch"));
    EXPECT_EQ(j["response"]["status"]["message"], r.why);
    return r.why;
  };
  EXPECT_EQ(deny(PodWith({Container("c", nullptr, {{"alibabacloud.com/gpu-milli", "1500"}})})),
            "pod team-a/p: container \"c\": alibabacloud.com/gpu-milli 1500 is neither a fraction "
            "of one GPU (1..999) nor whole GPUs (1000, 2000, ... 16000)");
  EXPECT_NE(deny(PodWith({Container("a", {{"aliyun.com/gpu-mem", "3"}}),
                          Container("b", nullptr, {{"alibabacloud.com/gpu-milli", "500"}})}))
                .find("container \"b\""),
            std::string::npos);
  json pod = PodWith({Container("c", {{"aliyun.com/gpu-mem", "3"}})});
  pod["metadata"]["annotations"]["nvidia.com/use-gputype"] = "A100,V100,t4";
  EXPECT_EQ(deny(pod),
            "metadata.annotations[nvidia.com/use-gputype]: \"V100\", \"t4\" matches no GPU model "
            "of the cluster (NVIDIA A10, NVIDIA A100-SXM4-80GB)");
  pod["metadata"]["annotations"]["nvidia.com/use-gputype"] = std::string(200, 'x');
  EXPECT_NE(deny(pod).find("annotation nvidia.com/use-gputype: entry"), std::string::npos);
  // Known models, a nouse-gputype of a model the cluster has not got, or models not known yet
  // (the scheduler has not synced): allowed.
  pod["metadata"]["annotations"]["nvidia.com/use-gputype"] = "a100";
  pod["metadata"]["annotations"]["nvidia.com/nouse-gputype"] = "H100";
  WebhookReply r = MutatePods(Review(pod).dump(), o);
  EXPECT_EQ(r.outcome, WebhookOutcome::kMutated) << r.why;
  pod["metadata"]["annotations"]["nvidia.com/use-gputype"] = "V100";
  o.gpu_models = [] { return std::vector<std::string>{}; };
  EXPECT_EQ(MutatePods(Review(pod).dump(), o).outcome, WebhookOutcome::kMutated);
  // Compute shares: above 100, on whole GPUs, without a share in its container, or alone.
  EXPECT_EQ(deny(PodWith({Container(
                "c", nullptr,
                {{"aliyun.com/gpu-mem", "3"}, {"aliyun.com/gpu-core.percentage", "120"}})})),
            "pod team-a/p: container \"c\": aliyun.com/gpu-core.percentage 120 is above 100 "
            "(percent of one GPU's compute)");
  EXPECT_NE(deny(PodWith({Container(
                     "c", nullptr,
                     {{"alibabacloud.com/gpu-milli", "2000"}, {"nvidia.com/gpucores", "50"}})}))
                .find("a whole GPU is not compute-limited"),
            std::string::npos);
  EXPECT_NE(deny(PodWith({Container("a", {{"aliyun.com/gpu-mem", "3"}}),
                          Container("b", nullptr, {{"aliyun.com/gpu-core.percentage", "10"}})}))
                .find("container \"b\": aliyun.com/gpu-core.percentage needs a memory share"),
            std::string::npos);
  EXPECT_EQ(deny(PodWith({Container("c", nullptr, {{"aliyun.com/gpu-core.percentage", "30"}})})),
            "aliyun.com/gpu-core.percentage needs a memory share in the same container "
            "(aliyun.com/gpu-mem, or a fraction of alibabacloud.com/gpu-milli), and this pod asks "
            "none");
  // HAMi's nvidia.com/gpucores beside nvidia.com/gpu is HAMi's pod: unchanged.
  EXPECT_EQ(
      MutatePods(
          Review(PodWith({Container("c", nullptr,
                                    {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "30"}})}))
              .dump(),
          o)
          .outcome,
      WebhookOutcome::kUnchanged);
  // A valid compute share is placed by gpushare-scheduler.
  EXPECT_EQ(MutatePods(Review(PodWith({Container("c", nullptr,
                                                 {{"aliyun.com/gpu-mem", "3"},
                                                  {"aliyun.com/gpu-core.percentage", "30"}})}))
                           .dump(),
                       o)
                .outcome,
            WebhookOutcome::kMutated);
  // Time-slices and whole GPUs follow their choice on the node (gpushare-node's preferred
  // allocation): a malformed choice or a model the cluster has not got is refused the same way;
  // a good one is allowed unchanged (kube-scheduler places such pods, not gpushare's profile).
  o.gpu_models = [] { return std::vector<std::string>{"NVIDIA A10"}; };
  json other = PodWith({Container("c", {{"nvidia.com/gpu", "1"}})});
  other["metadata"]["annotations"]["nvidia.com/use-gputype"] = "V100";
  EXPECT_EQ(deny(other),
            "metadata.annotations[nvidia.com/use-gputype]: \"V100\" matches no GPU model of the "
            "cluster (NVIDIA A10)");
  other["metadata"]["annotations"]["nvidia.com/use-gputype"] = "A10";
  other["metadata"]["annotations"]["nvidia.com/nouse-gpuuuid"] = "GPU-1,\x01";
  EXPECT_NE(deny(other).find("annotation nvidia.com/nouse-gpuuuid: entry"), std::string::npos);
  other["metadata"]["annotations"].erase("nvidia.com/nouse-gpuuuid");
  WebhookReply plain = MutatePods(Review(other).dump(), o);
  EXPECT_EQ(plain.outcome, WebhookOutcome::kUnchanged) << plain.why;
  EXPECT_FALSE(Response(plain).contains("patch"));
}

TEST(WebhookTest, TheSchedulerNameAndResourceAreConfigurable) {
  WebhookOptions o;
  o.resource_name = "example.com/vram";
  o.scheduler_name = "my-gpu-scheduler";
  const WebhookReply r =
      MutatePods(Review(PodWith({Container("c", {{"example.com/vram", "1"}})})).dump(), o);
  ASSERT_EQ(r.outcome, WebhookOutcome::kMutated);
  EXPECT_NE(kube::Base64Decode(Response(r)["patch"].get<std::string>())->find("my-gpu-scheduler"),
            std::string::npos);
  EXPECT_EQ(MutatePods(Review(PodWith({Container("c", {{"aliyun.com/gpu-mem", "1"}})})).dump(), o)
                .outcome,
            WebhookOutcome::kUnchanged);
}

// HAMi's pod spec with --hami-resources: each container asking HAMi's memory or compute beside
// nvidia.com/gpu is rewritten into gpushare's resources, what it asked is kept in an
// annotation, and the pod goes to gpushare's scheduler (also from schedulerName hami-scheduler).
TEST(WebhookTest, HamisPodSpecIsRewrittenWithHamiResources) {
  WebhookOptions o;
  o.hami_resources = true;
  // The patched pod (the review's object with the reply's patch applied), or null if unchanged.
  const auto apply = [&o](const json& pod) -> json {
    WebhookReply r = MutatePods(Review(pod).dump(), o);
    EXPECT_NE(r.outcome, WebhookOutcome::kDenied) << r.why;
    if (r.outcome != WebhookOutcome::kMutated) return nullptr;
    const json resp = json::parse(r.http.body)["response"];
    Result<std::string> patch = kube::Base64Decode(resp["patch"].get<std::string>());
    EXPECT_TRUE(patch.ok());
    return pod.patch(json::parse(*patch));
  };
  json out = apply(PodWith({Container("cuda", nullptr,
                                      {{"nvidia.com/gpu", 1},
                                       {"nvidia.com/gpumem", 3000},
                                       {"nvidia.com/gpucores", "30"},
                                       {"cpu", "1"}})}));
  ASSERT_FALSE(out.is_null());
  EXPECT_EQ(out["spec"]["schedulerName"], "gpushare-scheduler");
  EXPECT_EQ(
      out["spec"]["containers"][0]["resources"],
      json::parse(R"({"limits":{"aliyun.com/gpu-mem":"3","nvidia.com/gpucores":"30","cpu":"1"},
                            "requests":{"aliyun.com/gpu-mem":"3"}})"));
  EXPECT_EQ(
      json::parse(out["metadata"]["annotations"]["gpushare.io/hami-resources"].get<std::string>()),
      json::parse(R"({"cuda":{"nvidia.com/gpu":"1","nvidia.com/gpumem":"3000",
                         "nvidia.com/gpucores":"30",
                         "notes":"nvidia.com/gpumem 3000 MiB rounded up to 3 GiB"}})"));
  // A percentage is a fraction; in MiB units the memory is exact; requests go with the limits.
  out = apply(
      PodWith({Container("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "25"}},
                         {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "25"}})},
              "hami-scheduler"));
  ASSERT_FALSE(out.is_null());
  EXPECT_EQ(out["spec"]["schedulerName"], "gpushare-scheduler");
  EXPECT_EQ(out["spec"]["containers"][0]["resources"],
            json::parse(R"({"limits":{"alibabacloud.com/gpu-milli":"250"},
                            "requests":{"alibabacloud.com/gpu-milli":"250"}})"));
  // The API server hands quantities over canonical ("3k"); the annotation says 3000.
  out = apply(
      PodWith({Container("c", nullptr, {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3k"}})}));
  ASSERT_FALSE(out.is_null());
  EXPECT_NE(out["metadata"]["annotations"]["gpushare.io/hami-resources"].get<std::string>().find(
                R"("nvidia.com/gpumem":"3000")"),
            std::string::npos);
  o.unit = memshare::MemoryUnit::kMiB;
  out = apply(
      PodWith({Container("c", nullptr, {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}})}));
  ASSERT_FALSE(out.is_null());
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"],
            json::parse(R"({"aliyun.com/gpu-mem":"3000"})"));
  // Whole memory on two GPUs: two whole GPUs, and the compute share said dropped.
  out =
      apply(PodWith({Container("c", nullptr, {{"nvidia.com/gpu", 2}, {"nvidia.com/gpucores", 50}})},
                    "", {Container("init", {{"cpu", "1"}})}));
  ASSERT_FALSE(out.is_null());
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"],
            json::parse(R"({"alibabacloud.com/gpu-milli":"2000"})"));
  EXPECT_NE(out["metadata"]["annotations"]["gpushare.io/hami-resources"].get<std::string>().find(
                "nvidia.com/gpucores dropped: a whole GPU is not compute-limited"),
            std::string::npos);
  // Not HAMi's: a plain GPU, or another scheduler the user chose.
  EXPECT_TRUE(apply(PodWith({Container("c", nullptr, {{"nvidia.com/gpu", 1}})})).is_null());
  EXPECT_TRUE(
      apply(PodWith({Container("c", nullptr, {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}})},
                    "volcano"))
          .is_null());
  // What gpushare cannot express, or HAMi would not take, is refused naming the field.
  const auto deny = [&o](const json& pod) {
    WebhookReply r = MutatePods(Review(pod).dump(), o);
    EXPECT_EQ(r.outcome, WebhookOutcome::kDenied) << r.http.body;
    return r.why;
  };
  EXPECT_EQ(deny(PodWith(
                {Container("c", nullptr, {{"nvidia.com/gpu", 2}, {"nvidia.com/gpumem", 3000}})})),
            "pod team-a/p: container \"c\": nvidia.com/gpu 2 with nvidia.com/gpumem: memory shares "
            "on several GPUs in one container are not supported yet (ask one GPU, or whole GPUs)");
  EXPECT_EQ(deny(PodWith({Container("c", nullptr, {{"nvidia.com/gpumem", 3000}})})),
            "pod team-a/p: container \"c\": nvidia.com/gpumem without nvidia.com/gpu (HAMi's spec: "
            "how many GPUs, then the memory of each)");
  EXPECT_NE(deny(PodWith({Container("c", nullptr,
                                    {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", "3.5"}})}))
                .find("spec.containers[0].resources.limits[nvidia.com/gpumem]"),
            std::string::npos);
  EXPECT_NE(
      deny(
          PodWith({Container(
              "c", nullptr,
              {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}, {"nvidia.com/gpucores", 150}})}))
          .find("nvidia.com/gpucores 150 is above 100"),
      std::string::npos);
  // Without --hami-resources a HAMi pod is none of the webhook's business.
  o.hami_resources = false;
  EXPECT_EQ(
      MutatePods(Review(PodWith({Container("c", nullptr,
                                           {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}})}))
                     .dump(),
                 o)
          .outcome,
      WebhookOutcome::kUnchanged);
}

TEST(WebhookTest, EveryOtherPodIsAllowedUnchanged) {
  const std::vector<json> reviews = {
      Review(PodWith({Container("c", {{"nvidia.com/gpu", "1"}})})),          // other resource
      Review(PodWith({Container("c", {{"aliyun.com/gpu-mem", "0"}})})),      // zero
      Review(PodWith({Container("c", {{"aliyun.com/gpu-mem", "three"}})})),  // unparsable
      Review(PodWith({Container("c", nullptr)})),                            // nothing asked
      Review(PodWith({Container("c", {{"aliyun.com/gpu-mem", "3"}})}, "volcano")),  // user's choice
      Review(PodWith({Container("c", {{"aliyun.com/gpu-mem", "3"}})}), "UPDATE"),   // not CREATE
      Review(PodWith({Container("c", {{"aliyun.com/gpu-mem", "3"}})}), "CREATE",
             "Deployment"),                     // not a Pod
      Review({{"metadata", {{"name", "p"}}}}),  // no spec
  };
  for (const json& review : reviews) {
    const WebhookReply r = Mutate(review);
    const json resp = Response(r);
    EXPECT_EQ(r.outcome, WebhookOutcome::kUnchanged) << review.dump();
    EXPECT_FALSE(resp.contains("patch")) << review.dump();
    EXPECT_FALSE(resp.contains("patchType")) << review.dump();
  }
}

TEST(WebhookTest, AV1beta1ReviewIsAnsweredInKind) {
  json review = Review(PodWith({Container("c", {{"aliyun.com/gpu-mem", "1"}})}));
  review["apiVersion"] = "admission.k8s.io/v1beta1";
  const WebhookReply r = Mutate(review);
  ASSERT_EQ(r.http.code, 200);
  EXPECT_EQ(json::parse(r.http.body)["apiVersion"], "admission.k8s.io/v1beta1");
}

TEST(WebhookTest, MalformedReviewsAre400NamingTheProblem) {
  json no_uid = Review(PodWith({}));
  no_uid["request"].erase("uid");
  json no_object = Review(PodWith({}));
  no_object["request"].erase("object");
  json wrong_version = Review(PodWith({}));
  wrong_version["apiVersion"] = "v1";
  json wrong_kind = Review(PodWith({}));
  wrong_kind["kind"] = "Pod";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "body"},
      {"{\"apiVersion\":", "JSON"},
      {"[1,2]", "object"},
      {std::string(10000, '[') + std::string(10000, ']'), "nest"},
      {json{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}}.dump(), "request"},
      {no_uid.dump(), "request.uid"},
      {no_object.dump(), "request.object"},
      {wrong_version.dump(), "apiVersion"},
      {wrong_kind.dump(), "kind"},
  };
  for (const auto& [body, word] : cases) {
    const WebhookReply r = MutatePods(body, WebhookOptions{});
    EXPECT_EQ(r.http.code, 400) << body.substr(0, 80);
    EXPECT_EQ(r.outcome, WebhookOutcome::kInvalid);
    EXPECT_NE(r.http.body.find("AdmissionReview"), std::string::npos) << r.http.body;
    EXPECT_NE(r.why.find(word), std::string::npos) << r.why << " should name " << word;
  }
}

// ---- certificate lifecycle ----------------------------------------------------------------

constexpr int64_t kT0 = 1767225600;  // 2026-01-01T00:00:00Z
constexpr int64_t kDay = kDaySeconds;
const std::vector<std::string> kNames = ServiceDnsNames("gpushare-webhook", "gpushare");

CertFacts Valid(int64_t issued = kT0) {
  CertFacts f;
  f.present = f.ca_usable = f.leaf_usable = true;
  f.ca = {issued - 3600, issued + 5 * 365 * kDay, {}};
  f.leaf = {issued - 3600, issued + 365 * kDay, kNames};
  f.bundle = {f.ca};
  return f;
}

TEST(CertLifecycleTest, EveryBranchOfTheDecision) {
  EXPECT_EQ(DecideCert(CertFacts{}, kNames, kT0).action, CertAction::kNewCa);  // absent
  CertFacts f = Valid();
  f.ca_usable = false;
  f.ca_problem = "ca.key is not a PEM private key";
  CertDecision d = DecideCert(f, kNames, kT0);
  EXPECT_EQ(d.action, CertAction::kNewCa);
  EXPECT_NE(d.reason.find("ca.key"), std::string::npos);
  EXPECT_EQ(DecideCert(Valid(), kNames, kT0 + kDay).action, CertAction::kKeep);
  // The CA: renewed with less than a year left (together with a new leaf).
  EXPECT_EQ(DecideCert(Valid(), kNames, kT0 + 4 * 365 * kDay - kDay).action,
            CertAction::kNewLeaf);  // leaf old
  CertFacts late = Valid();
  late.leaf = {kT0 + 4 * 365 * kDay - 10 * kDay, kT0 + 5 * 365 * kDay, kNames};
  EXPECT_EQ(DecideCert(late, kNames, kT0 + 4 * 365 * kDay - kDay).action, CertAction::kKeep);
  EXPECT_EQ(DecideCert(late, kNames, kT0 + 4 * 365 * kDay + kDay).action, CertAction::kNewCa);
  CertFacts future = Valid(kT0 + 30 * kDay);
  EXPECT_EQ(DecideCert(future, kNames, kT0).action, CertAction::kNewCa);  // clock moved back
  // The leaf: a third of its life left is the limit.
  const int64_t third = kT0 - 3600 + (365 * kDay + 3600) * 2 / 3;
  EXPECT_EQ(DecideCert(Valid(), kNames, third - 60).action, CertAction::kKeep);
  d = DecideCert(Valid(), kNames, third + 60);
  EXPECT_EQ(d.action, CertAction::kNewLeaf);
  EXPECT_NE(d.reason.find("third"), std::string::npos);
  f = Valid();
  f.leaf_usable = false;
  f.leaf_problem = "tls.key does not match tls.crt";
  EXPECT_EQ(DecideCert(f, kNames, kT0).action, CertAction::kNewLeaf);
  EXPECT_EQ(DecideCert(Valid(), ServiceDnsNames("other", "gpushare"), kT0).action,
            CertAction::kNewLeaf);
  f = Valid();
  f.leaf.not_before = kT0 + kDay;
  EXPECT_EQ(DecideCert(f, kNames, kT0).action, CertAction::kNewLeaf);
  // The bundle: an old CA leaves it once expired.
  f = Valid();
  f.bundle.push_back({kT0 - 5 * 365 * kDay, kT0 + 10 * kDay, {}});
  EXPECT_EQ(DecideCert(f, kNames, kT0).action, CertAction::kKeep);
  EXPECT_EQ(DecideCert(f, kNames, kT0 + 11 * kDay).action, CertAction::kPruneBundle);
}

TEST(CertLifecycleTest, IssuedCertificatesInspectAsDecided) {
  const int64_t now = std::time(nullptr);
  Result<CertMaterial> first = IssueCertificates({}, CertAction::kNewCa, kNames, now);
  ASSERT_TRUE(first.ok()) << first.status().message();
  CertFacts f = InspectCertificates(*first, true);
  ASSERT_TRUE(f.ca_usable) << f.ca_problem;
  ASSERT_TRUE(f.leaf_usable) << f.leaf_problem;
  EXPECT_EQ(f.leaf.dns_names, kNames);
  EXPECT_EQ(f.ca.not_after - f.ca.not_before, 5 * 365 * kDay + 3600);
  EXPECT_EQ(f.leaf.not_after - f.leaf.not_before, 365 * kDay + 3600);
  EXPECT_EQ(DecideCert(f, kNames, now).action, CertAction::kKeep);

  // A new leaf keeps the CA.
  Result<CertMaterial> leaf = IssueCertificates(*first, CertAction::kNewLeaf, kNames, now);
  ASSERT_TRUE(leaf.ok());
  EXPECT_EQ(leaf->ca_crt, first->ca_crt);
  EXPECT_EQ(leaf->ca_key, first->ca_key);
  EXPECT_NE(leaf->tls_crt, first->tls_crt);
  EXPECT_TRUE(InspectCertificates(*leaf, true).leaf_usable);

  // A new CA: the bundle holds the new CA first, then the old one.
  Result<CertMaterial> ca = IssueCertificates(*leaf, CertAction::kNewCa, kNames, now);
  ASSERT_TRUE(ca.ok());
  EXPECT_NE(ca->ca_key, first->ca_key);
  f = InspectCertificates(*ca, true);
  ASSERT_TRUE(f.ca_usable && f.leaf_usable);
  ASSERT_EQ(f.bundle.size(), 2u);
  EXPECT_EQ(ca->ca_crt.substr(ca->ca_crt.size() - first->ca_crt.size()), first->ca_crt);

  // Mixed-up material is unusable, and says why.
  CertMaterial mixed = *ca;
  mixed.tls_key = first->tls_key;
  EXPECT_EQ(InspectCertificates(mixed, true).leaf_problem, "tls.key does not match tls.crt");
  mixed = *ca;
  mixed.tls_crt = first->tls_crt;
  mixed.tls_key = first->tls_key;
  EXPECT_EQ(InspectCertificates(mixed, true).leaf_problem, "tls.crt is not signed by the CA");
  mixed.ca_key = "garbage";
  EXPECT_EQ(InspectCertificates(mixed, true).ca_problem, "ca.key is not a PEM private key");
  EXPECT_EQ(DecideCert(InspectCertificates(mixed, true), kNames, now).action, CertAction::kNewCa);
}

}  // namespace
}  // namespace gpushare::scheduler
