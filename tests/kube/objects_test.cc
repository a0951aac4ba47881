// Typed views of Pod/Node/Binding/Event JSON, and the mapping of API errors to Status.
#include "kube/objects.h"

#include <gtest/gtest.h>

#include "kube/errors.h"

namespace gpushare::kube {
namespace {

using nlohmann::json;

const char* kPodJson = R"({
  "kind": "Pod", "apiVersion": "v1",
  "metadata": {
    "name": "hello-00001-deployment-7d9f-abcde", "namespace": "default",
    "uid": "6f1c0a2e-0000-4000-8000-000000000001", "resourceVersion": "4711",
    "creationTimestamp": "2026-12-02T10:00:00Z",
    "labels": {"serving.knative.dev/service": "hello"},
    "annotations": {"ALIYUN_COM_GPU_MEM_IDX": "3", "ALIYUN_COM_GPU_MEM_ASSIGNED": "false"},
    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "hello-rs",
                         "uid": "u-rs", "controller": true, "blockOwnerDeletion": true}]
  },
  "spec": {
    "nodeName": "gpu-node-1", "schedulerName": "default-scheduler",
    "initContainers": [{"name": "init", "image": "busybox", "resources": {}}],
    "containers": [
      {"name": "user-container", "image": "ghcr.io/x/y",
       "resources": {"limits": {"aliyun.com/gpu-mem": "3", "cpu": "500m"},
                     "requests": {"aliyun.com/gpu-mem": "3", "cpu": 0.5}}},
      {"name": "queue-proxy", "image": "gcr.io/knative/queue",
       "resources": {"requests": {"cpu": "25m"}}}
    ]
  },
  "status": {
    "phase": "Pending",
    "conditions": [{"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                    "lastTransitionTime": "2026-12-02T10:00:01Z"}]
  }
})";

TEST(ObjectsTest, DecodesAFullPod) {
  Result<Pod> p = DecodePod(json::parse(kPodJson));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->metadata.name, "hello-00001-deployment-7d9f-abcde");
  EXPECT_EQ(p->metadata.namespace_, "default");
  EXPECT_EQ(p->metadata.uid, "6f1c0a2e-0000-4000-8000-000000000001");
  EXPECT_EQ(p->metadata.resource_version, "4711");
  EXPECT_EQ(p->metadata.labels.at("serving.knative.dev/service"), "hello");
  EXPECT_EQ(p->metadata.annotations.at("ALIYUN_COM_GPU_MEM_IDX"), "3");
  ASSERT_EQ(p->metadata.owner_references.size(), 1u);
  EXPECT_TRUE(p->metadata.owner_references[0].controller);
  EXPECT_EQ(p->metadata.owner_references[0].kind, "ReplicaSet");
  EXPECT_FALSE(p->IsBeingDeleted());
  EXPECT_EQ(p->spec.node_name, "gpu-node-1");
  EXPECT_EQ(p->spec.scheduler_name, "default-scheduler");
  ASSERT_EQ(p->spec.containers.size(), 2u);
  ASSERT_EQ(p->spec.init_containers.size(), 1u);
  EXPECT_EQ(p->spec.containers[0].resources.limits.at("aliyun.com/gpu-mem"), "3");
  EXPECT_EQ(p->spec.containers[0].resources.requests.at("cpu"), "0.5");  // a JSON number
  EXPECT_EQ(p->status.phase, "Pending");
  ASSERT_NE(p->FindCondition("PodScheduled"), nullptr);
  EXPECT_EQ(p->FindCondition("PodScheduled")->status, "True");
  EXPECT_EQ(p->Key(), "default/hello-00001-deployment-7d9f-abcde");
  EXPECT_EQ(*ExtendedResourceCount(p->spec.containers[0], "aliyun.com/gpu-mem"), 3);
  EXPECT_EQ(*ExtendedResourceCount(p->spec.containers[1], "aliyun.com/gpu-mem"), 0);
}

TEST(ObjectsTest, NullAndMissingFieldsAreEmpty) {
  // What the API server sends for an empty object (e.g. a BOOKMARK), plus explicit nulls.
  json j = json::parse(R"({"kind":"Pod","apiVersion":"v1",
    "metadata":{"resourceVersion":"12","creationTimestamp":null,"labels":null,"annotations":null,
                "ownerReferences":null,"deletionTimestamp":null},
    "spec":{"containers":null,"initContainers":null,"nodeName":null},
    "status":{"conditions":null,"phase":null}})");
  Result<Pod> p = DecodePod(j);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->metadata.resource_version, "12");
  EXPECT_TRUE(p->metadata.name.empty());
  EXPECT_TRUE(p->metadata.labels.empty());
  EXPECT_FALSE(p->metadata.deletion_timestamp.has_value());
  EXPECT_TRUE(p->spec.containers.empty());
  EXPECT_TRUE(p->status.phase.empty());

  EXPECT_TRUE(DecodePod(json::object()).ok());
  EXPECT_TRUE(DecodePod(json::parse(R"({"metadata":null,"spec":null,"status":null})")).ok());
  EXPECT_TRUE(
      DecodePod(
          json::parse(
              R"({"spec":{"containers":[{"name":"c","resources":null},{"name":"d","resources":{"limits":null,"requests":{"cpu":null}}}]}})"))
          .ok());
  Result<Node> n = DecodeNode(
      json::parse(R"({"metadata":{"name":"n"},"spec":null,"status":{"capacity":null}})"));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_FALSE(n->IsReady());
}

TEST(ObjectsTest, WrongTypesAreErrorsNamingThePath) {
  struct Case {
    const char* json;
    const char* want;
  };
  for (const Case& c : std::initializer_list<Case>{
           {R"(null)", "pod: expected object, got null"},
           {R"([])", "pod: expected object, got array"},
           {R"({"metadata":5})", "pod.metadata: expected object, got number"},
           {R"({"metadata":{"name":7}})", "pod.metadata.name: expected string, got number"},
           {R"({"metadata":{"labels":{"a":1}}})",
            "pod.metadata.labels[a]: expected string, got number"},
           {R"({"metadata":{"annotations":[]}})",
            "pod.metadata.annotations: expected object, got array"},
           {R"({"spec":{"containers":{}}})", "pod.spec.containers: expected array, got object"},
           {R"({"spec":{"containers":[{"name":"a"},3]}})",
            "pod.spec.containers[1]: expected object, got number"},
           {R"({"spec":{"containers":[{"name":"a","resources":{"limits":[]}}]}})",
            "pod.spec.containers[0].resources.limits: expected object, got array"},
           {R"({"spec":{"containers":[{"name":"a","resources":{"limits":{"x":true}}}]}})",
            "pod.spec.containers[0].resources.limits[x]: expected quantity (string), got boolean"},
           {R"({"status":{"conditions":[{"type":1}]}})",
            "pod.status.conditions[0].type: expected string, got number"},
           {R"({"spec":"x"})", "pod.spec: expected object, got string"},
       }) {
    Result<Pod> p = DecodePod(json::parse(c.json));
    ASSERT_FALSE(p.ok()) << c.json;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(p.status().message(), c.want) << c.json;
  }
  Result<Node> n = DecodeNode(json::parse(R"({"spec":{"unschedulable":"yes"}})"));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().message(), "node.spec.unschedulable: expected boolean, got string");
}

TEST(ObjectsTest, Node) {
  Result<Node> n = DecodeNode(json::parse(R"({"kind":"Node","metadata":{"name":"gpu-node-1",
      "labels":{"gpushare":"true"},"annotations":{"gpushare.io/inventory":"{}"}},
      "spec":{"unschedulable":true},
      "status":{"capacity":{"aliyun.com/gpu-mem":"192","aliyun.com/gpu-count":8,"memory":"512Gi"},
                "allocatable":{"aliyun.com/gpu-mem":"184"},
                "conditions":[{"type":"MemoryPressure","status":"False"},{"type":"Ready","status":"True","reason":"KubeletReady"}]}})"));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->Key(), "gpu-node-1");
  EXPECT_TRUE(n->unschedulable);
  EXPECT_TRUE(n->IsReady());
  EXPECT_EQ(n->status.capacity.at("aliyun.com/gpu-count"), "8");
  EXPECT_EQ(n->status.allocatable.at("aliyun.com/gpu-mem"), "184");
  EXPECT_EQ(n->metadata.labels.at("gpushare"), "true");
  Result<Node> notready =
      DecodeNode(json::parse(R"({"status":{"conditions":[{"type":"Ready","status":"Unknown"}]}})"));
  EXPECT_FALSE(notready->IsReady());
}

TEST(ObjectsTest, BindingEncodesWhatTheApiServerReads) {
  Binding b{"p", "ns", "uid-1", "node-a", {{"ALIYUN_COM_GPU_MEM_IDX", "2"}}};
  json j = EncodeBinding(b);
  EXPECT_EQ(j["kind"], "Binding");
  EXPECT_EQ(j["apiVersion"], "v1");
  EXPECT_EQ(j["metadata"]["name"], "p");
  EXPECT_EQ(j["metadata"]["namespace"], "ns");
  EXPECT_EQ(j["metadata"]["uid"], "uid-1");
  EXPECT_EQ(j["target"]["kind"], "Node");
  EXPECT_EQ(j["target"]["name"], "node-a");
  EXPECT_EQ(j["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_IDX"], "2");
  json nouid = EncodeBinding(Binding{"p", "ns", "", "n", {}});
  EXPECT_FALSE(nouid["metadata"].contains("uid"));
}

TEST(ObjectsTest, EventRoundTrip) {
  Event e;
  e.metadata.name = "p.123";
  e.metadata.namespace_ = "ns";
  e.involved_object = {"v1", "Pod", "ns", "p", "uid", "5", ""};
  e.reason = "FailedAllocate";
  e.message = "units span GPUs 0 and 1";
  e.type = "Warning";
  e.source_component = "gpushare-node";
  e.source_host = "node-1";
  e.first_timestamp = e.last_timestamp = "2026-12-02T10:00:00Z";
  e.count = 2;
  json j = EncodeEvent(e);
  EXPECT_EQ(j["involvedObject"]["kind"], "Pod");
  EXPECT_EQ(j["source"]["component"], "gpushare-node");
  EXPECT_EQ(j["reportingComponent"], "gpushare-node");
  EXPECT_EQ(j["reportingInstance"], "node-1");
  Result<Event> back = DecodeEvent(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->reason, "FailedAllocate");
  EXPECT_EQ(back->message, e.message);
  EXPECT_EQ(back->type, "Warning");
  EXPECT_EQ(back->count, 2);
  EXPECT_EQ(back->involved_object.uid, "uid");
  EXPECT_EQ(back->source_host, "node-1");
}

TEST(ObjectsTest, ExtendedResourceCount) {
  Container c;
  c.name = "main";
  c.resources.limits["aliyun.com/gpu-mem"] = "3";
  EXPECT_EQ(*ExtendedResourceCount(c, "aliyun.com/gpu-mem"), 3);  // limits only
  c.resources.limits.clear();
  c.resources.requests["aliyun.com/gpu-mem"] = "4";
  EXPECT_EQ(*ExtendedResourceCount(c, "aliyun.com/gpu-mem"), 4);
  c.resources.limits["aliyun.com/gpu-mem"] = "5";
  Result<int64_t> differ = ExtendedResourceCount(c, "aliyun.com/gpu-mem");
  ASSERT_FALSE(differ.ok());
  EXPECT_NE(differ.status().message().find("differs from limit"), std::string::npos);
  c.resources.requests.clear();
  c.resources.limits["aliyun.com/gpu-mem"] = "1.5";
  Result<int64_t> frac = ExtendedResourceCount(c, "aliyun.com/gpu-mem");
  ASSERT_FALSE(frac.ok());
  EXPECT_NE(frac.status().message().find("container main: resources.limits[aliyun.com/gpu-mem]"),
            std::string::npos)
      << frac.status().message();
}

TEST(ErrorsTest, HttpCodesMapToStatusCodes) {
  auto body = [](int code, const char* reason, const char* msg) {
    return json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
                {"message", msg},   {"reason", reason},   {"code", code}}
        .dump();
  };
  Status conflict = StatusFromHttp(409, body(409, "Conflict", "the object has been modified"));
  EXPECT_EQ(conflict.code(), StatusCode::kAborted);
  EXPECT_TRUE(IsConflict(conflict));
  EXPECT_EQ(conflict.message(), "HTTP 409 Conflict: the object has been modified");
  EXPECT_EQ(StatusFromHttp(409, body(409, "AlreadyExists", "x")).code(),
            StatusCode::kAlreadyExists);
  Status nf = StatusFromHttp(404, body(404, "NotFound", "pods \"p\" not found"));
  EXPECT_TRUE(IsNotFound(nf));
  EXPECT_NE(nf.message().find("pods \"p\" not found"), std::string::npos);
  Status gone = StatusFromHttp(410, body(410, "Expired", "too old resource version: 5 (9)"));
  EXPECT_TRUE(IsExpired(gone));
  EXPECT_FALSE(IsConflict(gone));
  EXPECT_EQ(StatusFromHttp(401, "").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusFromHttp(403, body(403, "Forbidden", "nope")).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusFromHttp(400, "").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusFromHttp(422, "").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusFromHttp(429, "").code(), StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromHttp(500, "").code(), StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromHttp(503, "").code(), StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromHttp(504, "").code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(StatusFromHttp(413, "").code(), StatusCode::kResourceExhausted);
  // A body that is not a Status is quoted, truncated.
  Status html = StatusFromHttp(502, "<html>" + std::string(500, 'x') + "</html>");
  EXPECT_EQ(html.code(), StatusCode::kUnavailable);
  EXPECT_NE(html.message().find("HTTP 502: \"<html>"), std::string::npos) << html.message();
  EXPECT_LT(html.message().size(), 260u);
  EXPECT_TRUE(IsExpired(StatusFromApi(410, "Gone", "")));
}

}  // namespace
}  // namespace gpushare::kube
