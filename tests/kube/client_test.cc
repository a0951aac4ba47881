// kube::Client against the API-server double over real HTTP(S): get/list/paging/selectors,
// merge patch and 409, status, binding, events, authentication and token rotation, TLS,
// timeouts, size bounds, faults, rate limiting (counted on a fake clock) and concurrency.
#include "kube/client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "kube/errors.h"
#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/kube/test_util.h"

namespace gpushare::kube {
namespace {

using fakes::FakeApiServer;
using fakes::FakeApiServerOptions;
using fakes::Fault;
using fakes::Resource;
using nlohmann::json;
using testing::MakeClient;
using testing::TempDir;
using testing::TestPod;

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }
  void Start(FakeApiServerOptions o) {
    server_ = std::make_unique<FakeApiServer>(o);
    ASSERT_TRUE(server_->Start().ok());
    client_ = MakeClient(server_->url());
    ASSERT_NE(client_, nullptr);
  }
  // The server answers the next request after `d`.
  void DelayNextReply(std::chrono::milliseconds d) {
    Fault f;
    f.kind = Fault::Kind::kDelay;
    f.delay = d;
    server_->InjectFault(f);
  }
  std::unique_ptr<FakeApiServer> server_;
  std::shared_ptr<Client> client_;
};

TEST_F(ClientTest, GetTypedAndNotFound) {
  server_->Upsert(Resource::kPods, TestPod("p1", "ns1", "node-a"));
  server_->Upsert(Resource::kNodes,
                  {{"metadata", {{"name", "node-a"}}},
                   {"status",
                    {{"capacity", {{"aliyun.com/gpu-mem", "192"}}},
                     {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}});
  Result<Pod> p = client_->GetPod("ns1", "p1");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->metadata.name, "p1");
  EXPECT_EQ(p->spec.node_name, "node-a");
  EXPECT_FALSE(p->metadata.uid.empty());
  EXPECT_FALSE(p->metadata.resource_version.empty());
  Result<Node> n = client_->GetNode("node-a");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_TRUE(n->IsReady());
  EXPECT_EQ(n->status.capacity.at("aliyun.com/gpu-mem"), "192");

  Result<Pod> missing = client_->GetPod("ns1", "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(IsNotFound(missing.status()));
  EXPECT_NE(missing.status().message().find("HTTP 404 NotFound: pods \"nope\" not found"),
            std::string::npos)
      << missing.status().message();
  EXPECT_TRUE(IsNotFound(client_->GetNode("nope").status()));
}

TEST_F(ClientTest, ListWithSelectors) {
  server_->Upsert(Resource::kPods, TestPod("a", "default", "node-a", {{"app", "x"}}));
  server_->Upsert(Resource::kPods, TestPod("b", "default", "node-b", {{"app", "y"}}, "Running"));
  server_->Upsert(Resource::kPods, TestPod("c", "other", "node-a", {{"app", "x"}}, "Running"));
  server_->Upsert(Resource::kPods, TestPod("d", "other", "", {}));
  auto names = [](const Result<std::vector<Pod>>& r) {
    std::vector<std::string> out;
    if (r.ok()) {
      for (const Pod& p : *r) out.push_back(p.metadata.name);
    }
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names(client_->ListPods("")), (V{"a", "b", "c", "d"}));
  EXPECT_EQ(names(client_->ListPods("other")), (V{"c", "d"}));
  ListOptions o;
  o.label_selector = "app=x";
  EXPECT_EQ(names(client_->ListPods("", o)), (V{"a", "c"}));
  o.label_selector = "app notin (x),app";
  EXPECT_EQ(names(client_->ListPods("", o)), (V{"b"}));
  o = {};
  o.field_selector = "spec.nodeName=node-a";
  EXPECT_EQ(names(client_->ListPods("", o)), (V{"a", "c"}));
  o.field_selector = "spec.nodeName=node-a,status.phase=Pending";
  EXPECT_EQ(names(client_->ListPods("", o)), (V{"a"}));
  o.field_selector = "spec.nodeName=";  // unscheduled pods
  EXPECT_EQ(names(client_->ListPods("", o)), (V{"d"}));
  o.field_selector = "status.phase!=Running";
  EXPECT_EQ(names(client_->ListPods("", o)), (V{"a", "d"}));
  o.field_selector = "spec.fooBar=1";
  Result<std::vector<Pod>> bad = client_->ListPods("", o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("field label not supported: spec.fooBar"),
            std::string::npos);
  o = {};
  o.label_selector = "app in (x";
  EXPECT_EQ(client_->ListPods("", o).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, ListPagingIsAConsistentSnapshot) {
  for (int i = 0; i < 25; ++i)
    server_->Upsert(Resource::kPods, TestPod("p" + std::to_string(100 + i)));
  uint64_t rv_at_start = server_->resource_version();
  ListOptions o;
  o.limit = 10;
  Result<json> page1 = client_->ListPage(kPods, "default", o);
  ASSERT_TRUE(page1.ok()) << page1.status().ToString();
  EXPECT_EQ((*page1)["items"].size(), 10u);
  std::string cont = (*page1)["metadata"]["continue"];
  EXPECT_FALSE(cont.empty());
  EXPECT_EQ((*page1)["metadata"]["remainingItemCount"], 15);
  // A change after the first page is not visible in the later pages (same snapshot).
  json changed = *server_->Get(Resource::kPods, "default", "p120");
  changed["metadata"]["labels"]["changed"] = "yes";
  server_->Upsert(Resource::kPods, changed);
  server_->Remove(Resource::kPods, "default", "p124");
  o.continue_token = cont;
  Result<json> page2 = client_->ListPage(kPods, "default", o);
  ASSERT_TRUE(page2.ok()) << page2.status().ToString();
  ASSERT_EQ((*page2)["items"].size(), 10u);
  EXPECT_EQ((*page2)["items"][0]["metadata"]["name"], "p110");
  EXPECT_FALSE((*page2)["items"][9]["metadata"]["labels"].contains("changed"));  // p119
  o.continue_token = (*page2)["metadata"]["continue"];
  Result<json> page3 = client_->ListPage(kPods, "default", o);
  ASSERT_TRUE(page3.ok());
  ASSERT_EQ((*page3)["items"].size(), 5u);
  EXPECT_FALSE((*page3)["items"][0]["metadata"]["labels"].contains("changed"));  // p120 as it was
  EXPECT_EQ((*page3)["items"][4]["metadata"]["name"], "p124");                   // not yet deleted
  EXPECT_FALSE((*page3)["metadata"].contains("continue"));
  EXPECT_EQ((*page3)["metadata"]["resourceVersion"], std::to_string(rv_at_start));

  server_->ClearRequests();
  ListOptions all;
  all.limit = 10;
  Result<RawList> l = client_->List(kPods, "default", all);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->items.size(), 24u);
  EXPECT_EQ(l->resource_version, std::to_string(server_->resource_version()));
  EXPECT_EQ(server_->CountRequests("GET", "/pods"), 3u);
}

TEST_F(ClientTest, ExpiredContinueTokenRestartsTheListOnce) {
  for (int i = 0; i < 6; ++i) server_->Upsert(Resource::kPods, TestPod("p" + std::to_string(i)));
  ListOptions o;
  o.limit = 4;
  Result<json> page1 = client_->ListPage(kPods, "", o);
  ASSERT_TRUE(page1.ok());
  server_->Upsert(Resource::kPods, TestPod("p9"));
  server_->Compact();
  o.continue_token = (*page1)["metadata"]["continue"];
  Result<json> stale = client_->ListPage(kPods, "", o);
  ASSERT_FALSE(stale.ok());
  EXPECT_TRUE(IsExpired(stale.status())) << stale.status().ToString();
  EXPECT_NE(stale.status().message().find("HTTP 410"), std::string::npos);

  // List() meets the same expiry half-way through (page 2) and restarts without paging. The
  // first request takes a pass-through fault, the second the 410.
  fakes::Fault pass;
  pass.kind = fakes::Fault::Kind::kDelay;
  pass.delay = std::chrono::milliseconds(0);
  pass.path_contains = "/pods";
  fakes::Fault gone;
  gone.http_code = 410;
  gone.reason = "Expired";
  gone.message = "The provided continue parameter is too old";
  gone.path_contains = "/pods";
  server_->SetFaults({pass, gone});
  server_->ClearRequests();
  ListOptions paged;
  paged.limit = 4;
  Result<RawList> l = client_->List(kPods, "", paged);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->items.size(), 7u);
  // page 1, the 410 page 2, then one unpaged list.
  EXPECT_EQ(server_->CountRequests("GET", "/pods"), 3u);
  std::vector<fakes::RecordedRequest> reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[1].status, 410);
  EXPECT_EQ(reqs[2].query.find("limit"), std::string::npos) << reqs[2].query;
}

TEST_F(ClientTest, MergePatchAnnotationsSetsAndDeletes) {
  server_->Upsert(Resource::kPods, TestPod("p"));
  Result<Pod> a = client_->PatchPodAnnotations(
      "default", "p", {{"ALIYUN_COM_GPU_MEM_IDX", "2"}, {"ALIYUN_COM_GPU_MEM_ASSIGNED", "false"}});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->metadata.annotations.at("ALIYUN_COM_GPU_MEM_IDX"), "2");
  std::string rv1 = a->metadata.resource_version;
  Result<Pod> b = client_->PatchPodAnnotations(
      "default", "p",
      {{"ALIYUN_COM_GPU_MEM_ASSIGNED", "true"}, {"ALIYUN_COM_GPU_MEM_IDX", std::nullopt}});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->metadata.annotations.count("ALIYUN_COM_GPU_MEM_IDX"), 0u);
  EXPECT_EQ(b->metadata.annotations.at("ALIYUN_COM_GPU_MEM_ASSIGNED"), "true");
  EXPECT_NE(b->metadata.resource_version, rv1);
  json stored = *server_->Get(Resource::kPods, "default", "p");
  EXPECT_FALSE(stored["metadata"]["annotations"].contains("ALIYUN_COM_GPU_MEM_IDX"));
  // The request really was a merge patch.
  std::vector<fakes::RecordedRequest> reqs = server_->requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs.back().method, "PATCH");
  EXPECT_EQ(reqs.back().content_type, "application/merge-patch+json");
  // A no-op patch leaves the resourceVersion alone.
  Result<Pod> c =
      client_->PatchPodAnnotations("default", "p", {{"ALIYUN_COM_GPU_MEM_ASSIGNED", "true"}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->metadata.resource_version, b->metadata.resource_version);
  EXPECT_TRUE(IsNotFound(client_->PatchPodAnnotations("default", "nope", {{"a", "b"}}).status()));
}

TEST_F(ClientTest, ResourceVersionPreconditionConflicts) {
  server_->Upsert(Resource::kPods, TestPod("p"));
  Result<Pod> p = client_->GetPod("default", "p");
  ASSERT_TRUE(p.ok());
  std::string stale = p->metadata.resource_version;
  ASSERT_TRUE(client_->PatchPodAnnotations("default", "p", {{"x", "1"}}).ok());
  PatchOptions o;
  o.resource_version = stale;
  Result<Pod> conflict = client_->PatchPodAnnotations("default", "p", {{"x", "2"}}, o);
  ASSERT_FALSE(conflict.ok());
  EXPECT_TRUE(IsConflict(conflict.status()));
  EXPECT_NE(conflict.status().message().find("HTTP 409 Conflict"), std::string::npos);
  EXPECT_NE(conflict.status().message().find("the object has been modified"), std::string::npos);
  EXPECT_EQ(server_->Get(Resource::kPods, "default", "p")->at("metadata").at("annotations").at("x"),
            "1");
  o.resource_version = client_->GetPod("default", "p")->metadata.resource_version;
  Result<Pod> ok = client_->PatchPodAnnotations("default", "p", {{"x", "2"}}, o);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->metadata.annotations.at("x"), "2");
}

TEST_F(ClientTest, UidPreconditionRefusesAnObjectCreatedAgainUnderTheName) {
  server_->Upsert(Resource::kPods, TestPod("p"));
  const std::string first = client_->GetPod("default", "p")->metadata.uid;
  ASSERT_FALSE(first.empty());
  PatchOptions o;
  o.uid = first;
  Result<Pod> ok = client_->PatchPodAnnotations("default", "p", {{"x", "1"}}, o);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->metadata.uid, first);
  // Deleted and created again: same name, another UID.
  ASSERT_TRUE(client_->Delete(kPods, "default", "p").ok());
  server_->Upsert(Resource::kPods, TestPod("p"));
  const std::string second = client_->GetPod("default", "p")->metadata.uid;
  ASSERT_NE(second, first);
  Result<Pod> refused = client_->PatchPodAnnotations("default", "p", {{"x", "2"}}, o);
  ASSERT_FALSE(refused.ok());
  // kube-apiserver refuses a merge patch naming another UID as a change of an immutable field.
  EXPECT_NE(refused.status().message().find("metadata.uid: Invalid value: \"" + first +
                                            "\": field is immutable"),
            std::string::npos)
      << refused.status().message();
  const json meta = server_->Get(Resource::kPods, "default", "p")->at("metadata");
  EXPECT_FALSE(meta.contains("annotations") && meta.at("annotations").contains("x"));
}

TEST_F(ClientTest, OptimisticConcurrencyUnderContention) {
  server_->Upsert(Resource::kPods, TestPod("counter"));
  ClientOptions unlimited;
  unlimited.qps = 0;  // the default limiter (50 QPS) would dominate the run time
  client_ = MakeClient(server_->url(), unlimited);
  constexpr int kThreads = 6, kIncrements = 10;
  std::atomic<int> conflicts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) {
        for (;;) {
          Result<Pod> p = client_->GetPod("default", "counter");
          ASSERT_TRUE(p.ok());
          int n = 0;
          if (auto it = p->metadata.annotations.find("n"); it != p->metadata.annotations.end())
            n = std::stoi(it->second);
          PatchOptions o;
          o.resource_version = p->metadata.resource_version;
          Result<Pod> r =
              client_->PatchPodAnnotations("default", "counter", {{"n", std::to_string(n + 1)}}, o);
          if (r.ok()) break;
          ASSERT_TRUE(IsConflict(r.status())) << r.status().ToString();
          conflicts.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(client_->GetPod("default", "counter")->metadata.annotations.at("n"),
            std::to_string(kThreads * kIncrements));  // no lost update
}

TEST_F(ClientTest, StatusSubresource) {
  server_->Upsert(Resource::kPods, TestPod("p", "default", "node-a"));
  Result<Pod> s = client_->PatchPodStatus("default", "p", {{"phase", "Running"}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->status.phase, "Running");
  EXPECT_NE(server_->requests().back().path.find("/pods/p/status"), std::string::npos);
  // Status changes through the main resource are ignored, like the real server.
  Result<json> main =
      client_->MergePatch(kPods, "default", "p", {{"status", {{"phase", "Failed"}}}});
  ASSERT_TRUE(main.ok());
  EXPECT_EQ((*main)["status"]["phase"], "Running");
  // Spec changes through status are ignored too.
  Result<json> st = client_->MergePatch(kPods, "default", "p", {{"spec", {{"schedulerName", "x"}}}},
                                        PatchOptions{"status", ""});
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE((*st)["spec"].contains("schedulerName"));
  // Pod spec is immutable (nodeName is set by binding only).
  Result<json> move =
      client_->MergePatch(kPods, "default", "p", {{"spec", {{"nodeName", "node-b"}}}});
  ASSERT_FALSE(move.ok());
  EXPECT_EQ(move.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(move.status().message().find("HTTP 422 Invalid"), std::string::npos)
      << move.status().message();
  // Node status (capacity) through nodes/{name}/status.
  server_->Upsert(Resource::kNodes,
                  {{"metadata", {{"name", "node-a"}}}, {"status", {{"capacity", {{"cpu", "8"}}}}}});
  Result<Node> n =
      client_->PatchNodeStatus("node-a", {{"capacity", {{"aliyun.com/gpu-count", "8"}}}});
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->status.capacity.at("aliyun.com/gpu-count"), "8");
  EXPECT_EQ(n->status.capacity.at("cpu"), "8");
  Result<Node> na = client_->PatchNodeAnnotations("node-a", {{"gpushare.io/inventory", "[]"}});
  ASSERT_TRUE(na.ok());
  EXPECT_EQ(na->metadata.annotations.at("gpushare.io/inventory"), "[]");
}

TEST_F(ClientTest, Binding) {
  json created = server_->Upsert(Resource::kPods, TestPod("p"));
  std::string uid = created["metadata"]["uid"];
  Status wrong_uid = client_->Bind({"p", "default", "not-the-uid", "node-a", {}});
  EXPECT_TRUE(IsConflict(wrong_uid)) << wrong_uid.ToString();
  Status s = client_->Bind({"p", "default", uid, "node-a", {{"ALIYUN_COM_GPU_MEM_IDX", "1"}}});
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<fakes::RecordedRequest> reqs = server_->requests();
  EXPECT_EQ(reqs.back().method, "POST");
  EXPECT_EQ(reqs.back().path, "/api/v1/namespaces/default/pods/p/binding");
  EXPECT_EQ(reqs.back().status, 201);
  Result<Pod> p = client_->GetPod("default", "p");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->spec.node_name, "node-a");
  EXPECT_EQ(p->metadata.annotations.at("ALIYUN_COM_GPU_MEM_IDX"), "1");
  ASSERT_NE(p->FindCondition("PodScheduled"), nullptr);
  EXPECT_EQ(p->FindCondition("PodScheduled")->status, "True");
  Status again = client_->Bind({"p", "default", "", "node-b", {}});
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(IsConflict(again));
  EXPECT_NE(again.message().find("already assigned to node \"node-a\""), std::string::npos)
      << again.message();
  EXPECT_TRUE(IsNotFound(client_->Bind({"nope", "default", "", "node-a", {}})));
  EXPECT_EQ(client_->Bind({"p", "default", "", "", {}}).code(), StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, CreateDeleteAndEvents) {
  Result<json> c = client_->Create(kPods, "default", TestPod("new"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ((*c)["status"]["phase"], "Pending");
  Result<json> dup = client_->Create(kPods, "default", TestPod("new"));
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists) << dup.status().ToString();
  json invalid = TestPod("bad");
  invalid["spec"]["containers"] = json::array();
  EXPECT_EQ(client_->Create(kPods, "default", invalid).status().code(),
            StatusCode::kInvalidArgument);

  Event e;
  e.metadata.name = "new.1";
  e.metadata.namespace_ = "default";
  e.involved_object = {"v1", "Pod", "default", "new", (*c)["metadata"]["uid"], "", ""};
  e.reason = "FailedAllocate";
  e.message = "no GPU has 3 GiB free";
  e.type = "Warning";
  e.source_component = "gpushare-node";
  Result<Event> ev = client_->CreateEvent(e);
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  EXPECT_EQ(ev->reason, "FailedAllocate");
  ASSERT_EQ(server_->List(Resource::kEvents).size(), 1u);
  EXPECT_EQ(server_->List(Resource::kEvents)[0]["involvedObject"]["name"], "new");
  e.metadata.name = "new.2";
  e.involved_object.namespace_ = "elsewhere";
  EXPECT_EQ(client_->CreateEvent(e).status().code(), StatusCode::kInvalidArgument);

  // Unbound pods are deleted at once; a precondition on the UID is honoured.
  EXPECT_TRUE(IsConflict(
      client_->Delete(kPods, "default", "new", DeleteOptions{std::nullopt, "other-uid"})));
  ASSERT_TRUE(client_->Delete(kPods, "default", "new").ok());
  EXPECT_FALSE(server_->Get(Resource::kPods, "default", "new").has_value());
  EXPECT_TRUE(IsNotFound(client_->Delete(kPods, "default", "new")));
}

TEST_F(ClientTest, BearerTokenAuthentication) {
  server_->SetTokens({"good"});
  Result<Pod> anon = client_->GetPod("default", "p");
  ASSERT_FALSE(anon.ok());
  EXPECT_EQ(anon.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(anon.status().message().find("HTTP 401 Unauthorized"), std::string::npos);
  ClientConfig cfg;
  cfg.token = "good";
  auto c = MakeClient(server_->url(), {}, cfg);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(IsNotFound(c->GetPod("default", "p").status()));  // authenticated: a 404
  EXPECT_EQ(server_->requests().back().bearer_token, "good");
}

TEST_F(ClientTest, RotatedTokenFileIsPickedUp) {
  TempDir d;
  std::string path = d.File("token");
  testing::WriteFile(path, "token-one\n");
  server_->SetTokens({"token-one"});
  ClientConfig cfg;
  cfg.token_file = path;
  auto c = MakeClient(server_->url(), {}, cfg);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(IsNotFound(c->GetPod("default", "p").status()));
  // kubelet-style rotation: a new file swapped in; the server stops accepting the old token.
  testing::ReplaceFile(path, "token-two\n");
  server_->SetTokens({"token-two"});
  EXPECT_TRUE(IsNotFound(c->GetPod("default", "p").status()));
  EXPECT_EQ(server_->requests().back().bearer_token, "token-two");
  EXPECT_EQ(c->stats().token_reloads, 0u);

  // A rewrite the stat cannot see (same inode, size and mtime): the 401 makes the client
  // re-read the file and retry once.
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  testing::WriteFile(path, "token-3x3\n");
  struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  server_->SetTokens({"token-3x3"});
  server_->ClearRequests();
  EXPECT_TRUE(IsNotFound(c->GetPod("default", "p").status()));
  EXPECT_EQ(c->stats().token_reloads, 1u);
  std::vector<fakes::RecordedRequest> reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].status, 401);
  EXPECT_EQ(reqs[0].bearer_token, "token-two");
  EXPECT_EQ(reqs[1].bearer_token, "token-3x3");
  // A token that is simply wrong stays a 401 after one retry at most.
  server_->SetTokens({"something-else"});
  EXPECT_EQ(c->GetPod("default", "p").status().code(), StatusCode::kPermissionDenied);
}

TEST_F(ClientTest, RequestTimeout) {
  DelayNextReply(std::chrono::milliseconds(5000));
  ClientOptions o;
  o.request_timeout = std::chrono::milliseconds(200);
  auto c = MakeClient(server_->url(), o);
  Result<Pod> p = c->GetPod("default", "p");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kDeadlineExceeded) << p.status().ToString();
}

TEST_F(ClientTest, ResponseSizeIsBounded) {
  for (int i = 0; i < 20; ++i) server_->Upsert(Resource::kPods, TestPod("p" + std::to_string(i)));
  ClientOptions o;
  o.max_response_bytes = 2000;
  auto c = MakeClient(server_->url(), o);
  Result<std::vector<Pod>> l = c->ListPods("");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(l.status().message().find("larger than 2000 bytes"), std::string::npos);
  EXPECT_TRUE(c->GetPod("default", "p1").ok());  // small replies still fine
}

TEST_F(ClientTest, InjectedFaultsBecomeStatuses) {
  Fault e500;
  e500.count = 2;
  server_->InjectFault(e500);
  for (int i = 0; i < 2; ++i) {
    Result<Pod> p = client_->GetPod("default", "p");
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(p.status().message().find("HTTP 500 InternalError: injected fault"),
              std::string::npos)
        << p.status().message();
  }
  EXPECT_TRUE(IsNotFound(client_->GetPod("default", "p").status()));  // the fault is used up
  Fault drop;
  drop.kind = Fault::Kind::kDropConnection;
  server_->InjectFault(drop);
  Result<Pod> dropped = client_->GetPod("default", "p");
  ASSERT_FALSE(dropped.ok());
  EXPECT_EQ(dropped.status().code(), StatusCode::kUnavailable) << dropped.status().ToString();
  EXPECT_NE(dropped.status().message().find("transport"), std::string::npos)
      << dropped.status().message();
  Fault tmr;
  tmr.http_code = 429;
  server_->InjectFault(tmr);
  EXPECT_EQ(client_->GetPod("default", "p").status().code(), StatusCode::kUnavailable);
}

TEST_F(ClientTest, CancelEndsAUnaryRequestInFlight) {
  DelayNextReply(std::chrono::milliseconds(20000));
  Cancellation cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cancel.Cancel();
  });
  Result<HttpResponse> r =
      client_->Do({"GET", "/api/v1/namespaces/default/pods/p", "", ""}, &cancel);
  canceller.join();
  ASSERT_FALSE(r.ok());
  // Not the 30 s request timeout (kDeadlineExceeded): the Cancellation ended it.
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_NE(r.status().message().find("cancelled"), std::string::npos) << r.status().message();
  // The client goes on serving others.
  EXPECT_TRUE(IsNotFound(client_->GetPod("default", "p").status()));
}

TEST_F(ClientTest, SequentialRequestsReuseOneConnection) {
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(IsNotFound(client_->GetPod("default", "p").status()));
  EXPECT_EQ(client_->stats().requests, 20u);
  EXPECT_EQ(client_->stats().connections, 1u);
}

TEST_F(ClientTest, RateLimiterCountsOnAFakeClock) {
  auto now = std::make_shared<SimulatedClock>();
  auto slept = std::make_shared<std::vector<std::chrono::nanoseconds>>();
  ClientOptions o;
  o.qps = 5;
  o.burst = 2;
  o.clock = now;
  o.sleep_for = [now, slept](std::chrono::nanoseconds d) {
    slept->push_back(d);
    now->AdvanceNs(d.count());
  };
  auto c = MakeClient(server_->url(), o);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(IsNotFound(c->GetPod("default", "p").status()));
  EXPECT_EQ(server_->CountRequests("GET", "/pods/p"), 10u);
  ClientStats s = c->stats();
  EXPECT_EQ(s.requests, 10u);
  EXPECT_EQ(s.throttled, 8u);  // the burst of 2 went through at once
  ASSERT_EQ(slept->size(), 8u);
  for (auto d : *slept) EXPECT_EQ(d, std::chrono::milliseconds(200));
  EXPECT_EQ(s.throttle_wait_ns, 8u * 200000000u);
}

TEST_F(ClientTest, ConcurrentRequestsFromManyThreads) {
  for (int i = 0; i < 8; ++i) server_->Upsert(Resource::kPods, TestPod("p" + std::to_string(i)));
  ClientOptions o;
  o.qps = 0;
  auto c = MakeClient(server_->url(), o);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        if (c->GetPod("default", "p" + std::to_string(t)).ok()) ok.fetch_add(1);
        if (c->PatchPodAnnotations("default", "p" + std::to_string(t), {{"i", std::to_string(i)}})
                .ok()) {
          ok.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8 * 20 * 2);
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(server_->Get(Resource::kPods, "default", "p" + std::to_string(t))
                  ->at("metadata")
                  .at("annotations")
                  .at("i"),
              "19");
  }
}

TEST(ClientConfigTest, UnreachableAndBadServers) {
  FakeApiServer s;
  ASSERT_TRUE(s.Start().ok());
  std::string url = s.url();
  s.Stop();  // nothing listens there now
  ClientOptions o;
  o.connect_timeout = std::chrono::milliseconds(2000);
  auto c = MakeClient(url, o);
  ASSERT_NE(c, nullptr);
  Result<Pod> p = c->GetPod("default", "p");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(p.status().message().find(url), std::string::npos) << p.status().message();
  for (const char* bad : {"ftp://x", "10.0.0.1:443", "https://", "https://host/prefix"}) {
    ClientConfig cfg;
    cfg.server = bad;
    EXPECT_FALSE(Client::Create(cfg).ok()) << bad;
  }
  ClientConfig cfg;
  cfg.server = "https://127.0.0.1:1";
  cfg.token_file = "/nonexistent/token";
  Result<std::shared_ptr<Client>> missing = Client::Create(cfg);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/token"), std::string::npos);
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tls_ = testing::MakeTls(dir_);
    if (!tls_.ok)
      GTEST_SKIP()
          << "SKIPPED: openssl command-line tool absent (scripts/install-deps.sh installs it)";
  }
  std::unique_ptr<FakeApiServer> Serve(bool require_client_cert) {
    FakeApiServerOptions o;
    o.tls_cert_file = tls_.server_crt;
    o.tls_key_file = tls_.server_key;
    if (require_client_cert) o.tls_client_ca_file = tls_.ca_crt;
    auto s = std::make_unique<FakeApiServer>(o);
    EXPECT_TRUE(s->Start().ok());
    return s;
  }
  TempDir dir_;
  testing::TlsMaterial tls_;
};

TEST_F(TlsTest, VerifiesTheServerWithTheConfiguredCa) {
  auto s = Serve(false);
  ASSERT_EQ(s->url().rfind("https://", 0), 0u);
  ClientConfig good;
  good.ca_pem = tls_.Pem(tls_.ca_crt);
  auto c = MakeClient(s->url(), {}, good);
  EXPECT_TRUE(IsNotFound(c->GetPod("default", "p").status()));

  ClientConfig wrong;
  wrong.ca_pem = tls_.Pem(tls_.other_ca_crt);
  Result<Pod> w = MakeClient(s->url(), {}, wrong)->GetPod("default", "p");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(w.status().message().find("TLS"), std::string::npos) << w.status().message();

  // The system trust store does not know the test CA.
  EXPECT_EQ(MakeClient(s->url())->GetPod("default", "p").status().code(), StatusCode::kUnavailable);

  ClientConfig insecure;
  insecure.insecure_skip_tls_verify = true;
  EXPECT_TRUE(IsNotFound(MakeClient(s->url(), {}, insecure)->GetPod("default", "p").status()));
}

TEST_F(TlsTest, TlsServerNameOverridesTheHostForVerification) {
  auto s = Serve(false);
  // The certificate names 127.0.0.1 and kubernetes.default.svc, not "localhost".
  std::string by_name = "https://localhost:" + std::to_string(s->port());
  ClientConfig plain;
  plain.ca_pem = tls_.Pem(tls_.ca_crt);
  EXPECT_EQ(MakeClient(by_name, {}, plain)->GetPod("default", "p").status().code(),
            StatusCode::kUnavailable);
  ClientConfig named = plain;
  named.tls_server_name = "kubernetes.default.svc";
  Result<Pod> p = MakeClient(by_name, {}, named)->GetPod("default", "p");
  EXPECT_TRUE(IsNotFound(p.status())) << p.status().ToString();
}

TEST_F(TlsTest, ClientCertificates) {
  auto s = Serve(true);
  ClientConfig nocert;
  nocert.ca_pem = tls_.Pem(tls_.ca_crt);
  EXPECT_EQ(MakeClient(s->url(), {}, nocert)->GetPod("default", "p").status().code(),
            StatusCode::kUnavailable);
  ClientConfig cert = nocert;
  cert.client_cert_pem = tls_.Pem(tls_.client_crt);
  cert.client_key_pem = tls_.Pem(tls_.client_key);
  Result<Pod> p = MakeClient(s->url(), {}, cert)->GetPod("default", "p");
  EXPECT_TRUE(IsNotFound(p.status())) << p.status().ToString();
}

TEST_F(TlsTest, KubeconfigEndToEnd) {
  auto s = Serve(true);
  s->SetTokens({"kc-token"});
  std::string kc = dir_.File("kubeconfig");
  testing::WriteFile(kc,
                     "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                     "clusters: [{name: k, cluster: {server: '" +
                         s->url() +
                         "', certificate-authority: ca.crt}}]\n"
                         "contexts: [{name: t, context: {cluster: k, user: u, namespace: ml}}]\n"
                         "users: [{name: u, user: {token: kc-token, client-certificate: "
                         "client.crt, client-key: client.key}}]\n");
  Result<ClientConfig> cfg = LoadKubeconfig({{kc}, true, ""});
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  Result<std::shared_ptr<Client>> c = Client::Create(*cfg);
  ASSERT_TRUE(c.ok());
  s->Upsert(Resource::kPods, TestPod("p", "ml"));
  Result<Pod> p = (*c)->GetPod((*c)->config().namespace_, "p");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->metadata.namespace_, "ml");
}

}  // namespace
}  // namespace gpushare::kube

namespace gpushare::kube {
namespace {

// nghttpd (Debian's nghttp2-server): an HTTP/2 server over TLS, as kube-apiserver is, serving
// the files of a directory. Skips the test when the binary is absent.
class Http2Server {
 public:
  Http2Server(const testing::TlsMaterial& tls, const TempDir& dir) {
    for (const char* p : {"/usr/sbin/nghttpd", "/usr/bin/nghttpd"})
      if (::access(p, X_OK) == 0) binary_ = p;
    if (binary_.empty()) return;
    std::filesystem::create_directories(dir.File("www"));
    testing::WriteFile(dir.File("www/ok"), "ok\n");
    port_ = FreePort();
    const std::string port = std::to_string(port_), docroot = dir.File("www");
    pid_ = ::fork();
    if (pid_ == 0) {
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::execl(binary_.c_str(), binary_.c_str(), "-a", "127.0.0.1", "-d", docroot.c_str(),
              port.c_str(), tls.server_key.c_str(), tls.server_crt.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 200 && !Accepts(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ~Http2Server() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool present() const { return !binary_.empty(); }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  bool Accepts() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
  }

 private:
  static int FreePort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof a;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), n);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    ::close(fd);
    return ntohs(a.sin_port);
  }
  std::string binary_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// A burst of requests in flight together (binds, patches, events) is one TLS connection to an
// HTTP/2 server, each request a stream of it: not a connection and a handshake each.
TEST_F(TlsTest, RequestsInFlightTogetherShareOneHttp2Connection) {
  Http2Server h2(tls_, dir_);
  if (!h2.present())
    GTEST_SKIP() << "SKIPPED: nghttpd absent (scripts/install-deps.sh installs nghttp2-server)";
  ASSERT_TRUE(h2.Accepts()) << "nghttpd did not start on " << h2.url();
  ClientConfig cfg;
  cfg.ca_pem = tls_.Pem(tls_.ca_crt);
  ClientOptions o;
  o.qps = 0;
  auto c = MakeClient(h2.url(), o, cfg);
  constexpr int kThreads = 32, kEach = 4;
  std::atomic<int> ready{0}, ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int i = 0; i < kEach; ++i) {
        Result<HttpResponse> r = c->Do({"GET", "/ok", "", ""});
        if (r.ok() && r->code == 200 && r->body == "ok\n") ok.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kThreads * kEach);
  EXPECT_EQ(c->stats().requests, static_cast<uint64_t>(kThreads * kEach));
  EXPECT_EQ(c->stats().connections, 1u);
}

}  // namespace
}  // namespace gpushare::kube
