// gpushare-node's metrics listener (node/metrics_server.h) in process, on net/'s HTTP server,
// over raw sockets: the probes (their reason, 503 when failing), /metrics behind a TokenReview
// and a SubjectAccessReview (401 with a challenge, 403, 200) and when it cannot be served (503),
// HEAD, another path (404 naming the served ones), another method (405), a head over 16 KiB
// (431), several requests on one kept-alive connection, and the option checks.
#include "node/metrics_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "base/clock.h"
#include "kube/authz.h"
#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/kube/test_util.h"
#include "tests/net/raw_http.h"

namespace gpushare::node {
namespace {

using net::testing::Raw;

std::string Get(std::string_view path, std::string_view extra = "") {
  return "GET " + std::string(path) + " HTTP/1.1\r\nHost: node\r\n" + std::string(extra) + "\r\n";
}

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    api_.SetIdentity("prom-token", {"system:serviceaccount:monitoring:prometheus", "u1", {}});
    api_.SetIdentity("app-token", {"system:serviceaccount:ml:app", "u2", {}});
    api_.Grant({"system:serviceaccount:monitoring:prometheus", "/metrics", "get"});
  }
  void TearDown() override {
    server_.reset();
    api_.Stop();
  }
  MetricsHandlers Handlers() {
    MetricsHandlers h;
    h.metrics = [this] {
      scrapes_.fetch_add(1);
      return std::string("gpushare_up 1\n");
    };
    h.healthz = [this] { return Probe{healthy_.load(), healthy_.load() ? "ok" : "loop stalled"}; };
    h.readyz = [] { return Probe{false, "nvidia.com/gpu not registered with kubelet yet"}; };
    return h;
  }
  void Start(MetricsServerOptions o) {
    o.listen = "127.0.0.1:0";
    Result<std::unique_ptr<MetricsServer>> s = MetricsServer::Start(o, Handlers());
    ASSERT_TRUE(s.ok()) << s.status().message();
    server_ = std::move(*s);
  }
  MetricsServerOptions Kubernetes() {
    MetricsServerOptions o;
    o.auth = MetricsAuth::kKubernetes;
    o.authorizer = std::make_shared<kube::RequestAuthorizer>(
        kube::testing::MakeClient(api_.url()), kube::AuthorizerOptions{},
        std::make_shared<SimulatedClock>(1000));
    return o;
  }
  Raw::Response Ask(const std::string& request, bool head_only = false) {
    Raw c(server_->port());
    EXPECT_TRUE(c.connected());
    EXPECT_TRUE(c.Send(request));
    return c.Read(head_only);
  }

  fakes::FakeApiServer api_;
  std::unique_ptr<MetricsServer> server_;
  std::atomic<int> scrapes_{0};
  std::atomic<bool> healthy_{true};
};

TEST_F(MetricsServerTest, TheProbesSayWhy) {
  Start(Kubernetes());
  Raw::Response h = Ask(Get("/healthz"));
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.body, "ok\n");
  EXPECT_NE(h.head.find("Content-Type: text/plain; charset=utf-8\r\n"), std::string::npos);
  EXPECT_NE(h.head.find("Cache-Control: no-store\r\n"), std::string::npos) << h.head;
  healthy_ = false;
  h = Ask(Get("/healthz"));
  EXPECT_EQ(h.status, 503);
  EXPECT_EQ(h.body, "loop stalled\n");
  Raw::Response r = Ask(Get("/readyz"));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, "nvidia.com/gpu not registered with kubelet yet\n");
  EXPECT_EQ(scrapes_.load(), 0);  // the probes need no token and read no metrics
}

TEST_F(MetricsServerTest, MetricsNeedATokenAllowedToGetThem) {
  Start(Kubernetes());
  Raw::Response anon = Ask(Get("/metrics"));
  EXPECT_EQ(anon.status, 401) << anon.body;
  EXPECT_NE(anon.head.find("WWW-Authenticate: Bearer realm=\"gpushare-node\"\r\n"),
            std::string::npos)
      << anon.head;
  EXPECT_EQ(anon.body.rfind("Unauthorized: ", 0), 0u) << anon.body;
  Raw::Response app = Ask(Get("/metrics", "Authorization: Bearer app-token\r\n"));
  EXPECT_EQ(app.status, 403) << app.body;
  EXPECT_EQ(app.body.rfind("Forbidden: ", 0), 0u) << app.body;
  EXPECT_EQ(scrapes_.load(), 0);
  Raw::Response prom = Ask(Get("/metrics", "Authorization: Bearer prom-token\r\n"));
  ASSERT_EQ(prom.status, 200) << prom.body;
  EXPECT_EQ(prom.body, "gpushare_up 1\n");
  EXPECT_NE(prom.head.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"),
            std::string::npos)
      << prom.head;
  EXPECT_EQ(scrapes_.load(), 1);

  // The API server cannot be asked: 503 and why, never the metrics.
  api_.Stop();
  Raw::Response down = Ask(Get("/metrics", "Authorization: Bearer other-token\r\n"));
  EXPECT_EQ(down.status, 503) << down.body;
  EXPECT_EQ(down.body.rfind("cannot check the caller: ", 0), 0u) << down.body;
  EXPECT_EQ(scrapes_.load(), 1);
}

TEST_F(MetricsServerTest, UnavailableMetricsStillServeTheProbes) {
  MetricsServerOptions o;  // kubernetes, and no authorizer: allowed only with this set
  o.unavailable_metrics = "no Kubernetes API to check callers with";
  Start(o);
  Raw::Response m = Ask(Get("/metrics"));
  EXPECT_EQ(m.status, 503);
  EXPECT_EQ(m.body, "no Kubernetes API to check callers with\n");
  EXPECT_EQ(Ask(Get("/healthz")).status, 200);
}

TEST_F(MetricsServerTest, RefusalsNameWhatIsServedAndConnectionsAreKeptAlive) {
  MetricsServerOptions o;
  o.auth = MetricsAuth::kNone;  // on loopback
  Start(o);
  Raw c(server_->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(Get("/metrics") + Get("/nope") +
                     "POST /metrics HTTP/1.1\r\nHost: n\r\n"
                     "Content-Length: 0\r\n\r\n" +
                     "HEAD /metrics HTTP/1.1\r\nHost: n\r\n\r\n"));
  Raw::Response m = c.Read();
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.body, "gpushare_up 1\n");
  Raw::Response nf = c.Read();
  EXPECT_EQ(nf.status, 404);
  EXPECT_NE(nf.body.find("no endpoint GET /nope (served: /metrics, /healthz, /readyz)"),
            std::string::npos)
      << nf.body;
  Raw::Response post = c.Read();
  EXPECT_EQ(post.status, 405);
  EXPECT_NE(post.head.find("Allow: GET, HEAD\r\n"), std::string::npos) << post.head;
  Raw::Response head = c.Read(/*head_only=*/true);
  EXPECT_EQ(head.status, 200);
  EXPECT_NE(head.head.find("Content-Length: 14\r\n"), std::string::npos) << head.head;
  EXPECT_EQ(scrapes_.load(), 2);

  Raw big(server_->port());
  ASSERT_TRUE(big.connected());
  ASSERT_TRUE(big.Send(Get("/metrics", "X-Big: " + std::string(17 * 1024, 'x') + "\r\n")));
  EXPECT_EQ(big.Read().status, 431);
}

TEST_F(MetricsServerTest, OptionsAreCheckedBeforeServing) {
  MetricsServerOptions open;
  open.auth = MetricsAuth::kNone;
  open.listen = ":0";
  Result<std::unique_ptr<MetricsServer>> s = MetricsServer::Start(open, Handlers());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--metrics-auth=none: only allowed with a loopback"),
            std::string::npos)
      << s.status().message();
  MetricsServerOptions no_api;
  no_api.listen = "127.0.0.1:0";
  s = MetricsServer::Start(no_api, Handlers());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--metrics-auth=kubernetes: needs the Kubernetes API"),
            std::string::npos)
      << s.status().message();

  Start(Kubernetes());
  MetricsServerOptions taken = Kubernetes();
  taken.listen = "127.0.0.1:" + std::to_string(server_->port());
  s = MetricsServer::Start(taken, Handlers());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--metrics-listen: cannot serve on 127.0.0.1:"),
            std::string::npos)
      << s.status().message();
}

}  // namespace
}  // namespace gpushare::node
