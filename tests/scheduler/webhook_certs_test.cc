// The webhook's self-managed certificate against the API-server double (Secret created, kept,
// rotated with a fake clock, raced by two replicas; the configuration's caBundle patched), and
// the served endpoint over real HTTPS with the CA from the Secret, before and after a rotation.
#include "scheduler/webhook_certs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <thread>

#include "kube/base64.h"
#include "scheduler/service.h"
#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/fakes/apiserver/kubeconfig_text.h"
#include "tests/kube/test_util.h"
#include "tests/net/raw_http.h"

namespace gpushare::scheduler {
namespace {

using fakes::FakeApiServer;
using fakes::Resource;
using kube::testing::WaitUntil;
using nlohmann::json;
// A duration in nanoseconds, for the simulated wall time.
int64_t Ns(std::chrono::nanoseconds d) {
  return d.count();
}

const char* kNs = "gpushare";
const char* kSecret = "gpushare-webhook-tls";
const char* kConfig = "gpushare-webhook";

class WebhookCertsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    client_ = kube::testing::MakeClient(api_.url());
    CreateConfiguration();
  }
  void CreateConfiguration() {
    api_.Upsert(
        Resource::kMutatingWebhookConfigurations,
        {{"metadata", {{"name", kConfig}}},
         {"webhooks",
          {{{"name", "pods.gpushare.io"},
            {"clientConfig",
             {{"service",
               {{"name", "gpushare-webhook"}, {"namespace", kNs}, {"path", "/mutate-pods"}}}}}},
           {{"name", "pods2.gpushare.io"}, {"clientConfig", {{"caBundle", "b2xk"}}}}}}});
  }
  WebhookCertOptions Options(const std::string& dir) {
    WebhookCertOptions o;
    o.cert_dir = dir;
    o.secret_namespace = kNs;
    o.secret_name = kSecret;
    o.configuration = kConfig;
    o.service_name = "gpushare-webhook";
    o.service_namespace = kNs;
    o.clock = clock_;
    return o;
  }
  CertMaterial SecretMaterial() {
    std::optional<json> s = api_.Get(Resource::kSecrets, kNs, kSecret);
    EXPECT_TRUE(s.has_value());
    CertMaterial m;
    if (!s) return m;
    m.tls_crt = *kube::Base64Decode((*s)["data"]["tls.crt"].get<std::string>());
    m.tls_key = *kube::Base64Decode((*s)["data"]["tls.key"].get<std::string>());
    m.ca_crt = *kube::Base64Decode((*s)["data"]["ca.crt"].get<std::string>());
    m.ca_key = *kube::Base64Decode((*s)["data"]["ca.key"].get<std::string>());
    return m;
  }
  std::vector<std::string> Bundles() {
    std::vector<std::string> out;
    const json config = *api_.Get(Resource::kMutatingWebhookConfigurations, "", kConfig);
    for (const json& w : config["webhooks"])
      out.push_back(*kube::Base64Decode(w["clientConfig"]["caBundle"].get<std::string>()));
    return out;
  }

  FakeApiServer api_;
  std::shared_ptr<kube::Client> client_;
  kube::testing::TempDir tmp_;
  // Wall time starts at the real time (the certificates are dated by it) and moves by the test.
  std::shared_ptr<SimulatedClock> clock_ =
      std::make_shared<SimulatedClock>(1000, RealClock()->UnixNs());
};

TEST_F(WebhookCertsTest, AnAbsentSecretIsCreatedAndTheConfigurationPatched) {
  WebhookCertManager m(client_, Options(tmp_.path()));
  EXPECT_FALSE(m.certs_in_place());
  ASSERT_TRUE(m.SyncOnce().ok()) << m.stats().last_error;
  const json secret = *api_.Get(Resource::kSecrets, kNs, kSecret);
  EXPECT_EQ(secret["type"], "kubernetes.io/tls");
  const CertMaterial s = SecretMaterial();
  const CertFacts f = InspectCertificates(s, true);
  EXPECT_TRUE(f.ca_usable && f.leaf_usable) << f.ca_problem << f.leaf_problem;
  EXPECT_EQ(f.leaf.dns_names, ServiceDnsNames("gpushare-webhook", kNs));
  EXPECT_TRUE(m.certs_in_place());
  EXPECT_EQ(kube::testing::ReadFile(m.cert_file()), s.tls_crt);
  EXPECT_EQ(kube::testing::ReadFile(m.key_file()), s.tls_key);
  EXPECT_EQ(Bundles(), std::vector<std::string>(
                           2, s.ca_crt));  // every webhook, also the one with a stale bundle
  EXPECT_EQ(m.stats().secret_writes, 1u);
  EXPECT_EQ(m.stats().bundle_patches, 1u);
}

TEST_F(WebhookCertsTest, AValidSecretIsLeftAloneAndNothingIsWritten) {
  WebhookCertManager m(client_, Options(tmp_.path()));
  ASSERT_TRUE(m.SyncOnce().ok());
  const uint64_t rv = api_.resource_version();
  api_.ClearRequests();
  clock_->SetUnixNs(clock_->UnixNs() + Ns(std::chrono::hours(24 * 30)));
  ASSERT_TRUE(m.SyncOnce().ok()) << m.stats().last_error;
  EXPECT_EQ(api_.resource_version(), rv);  // no write at all
  EXPECT_EQ(api_.CountRequests("GET", ""), 2u);
  EXPECT_EQ(api_.CountRequests("PUT", "") + api_.CountRequests("POST", "") +
                api_.CountRequests("PATCH", ""),
            0u);
  EXPECT_EQ(m.stats().last_action, "keep");
  EXPECT_EQ(m.stats().file_writes, 1u);
}

TEST_F(WebhookCertsTest, ALeafNearExpiryIsReplacedUnderTheSameCa) {
  clock_->SetUnixNs(RealClock()->UnixNs() -
                    Ns(std::chrono::hours(24 * 300)));  // issued 300 days ago
  WebhookCertManager m(client_, Options(tmp_.path()));
  ASSERT_TRUE(m.SyncOnce().ok());
  const CertMaterial before = SecretMaterial();
  clock_->SetUnixNs(RealClock()->UnixNs());  // 65 days left of 365: less than a third
  ASSERT_TRUE(m.SyncOnce().ok()) << m.stats().last_error;
  const CertMaterial after = SecretMaterial();
  EXPECT_EQ(m.stats().last_action, "new_leaf");
  EXPECT_EQ(after.ca_crt, before.ca_crt);
  EXPECT_EQ(after.ca_key, before.ca_key);
  EXPECT_NE(after.tls_crt, before.tls_crt);
  EXPECT_EQ(kube::testing::ReadFile(m.cert_file()), after.tls_crt);
  EXPECT_EQ(m.stats().bundle_patches, 1u);  // the bundle did not change
}

TEST_F(WebhookCertsTest, TwoReplicasRacingServeTheSameCertificate) {
  kube::testing::TempDir dir_b;
  WebhookCertManager a(client_, Options(tmp_.path()));
  WebhookCertManager b(kube::testing::MakeClient(api_.url()), Options(dir_b.path()));
  for (int round = 0; round < 2; ++round) {
    // Both decide at once (a fresh Secret, then a rotation): one write wins, the other
    // replica's create or update is refused (409) and it serves the winner's.
    if (round == 1) clock_->SetUnixNs(clock_->UnixNs() + Ns(std::chrono::hours(24 * 300)));
    // The first write is held back, so that the other replica reads the same state meanwhile.
    fakes::Fault hold;
    hold.kind = fakes::Fault::Kind::kDelay;
    hold.method = round == 0 ? "POST" : "PUT";
    hold.path_contains = "/secrets";
    hold.delay = std::chrono::milliseconds(500);
    api_.InjectFault(hold);
    const uint64_t conflicts = a.stats().conflicts + b.stats().conflicts;
    Status sa, sb;
    std::thread ta([&] { sa = a.SyncOnce(); });
    std::thread tb([&] { sb = b.SyncOnce(); });
    ta.join();
    tb.join();
    ASSERT_TRUE(sa.ok()) << sa.message();
    ASSERT_TRUE(sb.ok()) << sb.message();
    EXPECT_EQ(a.stats().conflicts + b.stats().conflicts, conflicts + 1);  // the loser re-read
    const CertMaterial s = SecretMaterial();
    EXPECT_EQ(kube::testing::ReadFile(a.cert_file()), s.tls_crt);
    EXPECT_EQ(kube::testing::ReadFile(b.cert_file()), s.tls_crt);
    EXPECT_EQ(kube::testing::ReadFile(b.key_file()), s.tls_key);
    EXPECT_EQ(Bundles(), std::vector<std::string>(2, s.ca_crt));
  }
}

TEST_F(WebhookCertsTest, AMissingConfigurationIsRetriedUntilItExists) {
  api_.Remove(Resource::kMutatingWebhookConfigurations, "", kConfig);
  WebhookCertManager m(client_, Options(tmp_.path()));
  Status s = m.SyncOnce();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find(kConfig), std::string::npos);
  EXPECT_TRUE(m.certs_in_place());  // serving does not wait for the configuration
  CreateConfiguration();            // the chart creates it
  EXPECT_TRUE(m.SyncOnce().ok()) << m.stats().last_error;
  EXPECT_EQ(Bundles(), std::vector<std::string>(2, SecretMaterial().ca_crt));
}

// The service end to end: readiness waits for the certificate; POST /mutate-pods over HTTPS
// verified with the Secret's CA; a rotation (new CA, forced by replacing the Secret's CA) is
// served to new connections without a restart.
TEST_F(WebhookCertsTest, TheServedEndpointVerifiesWithTheSecretsCaAcrossARotation) {
  kube::testing::TempDir dir;
  const std::string kubeconfig = dir.File("kubeconfig");
  kube::testing::WriteFile(kubeconfig, fakes::PlainKubeconfig(api_.url()));
  ServiceOptions o;
  o.kubeconfig = kubeconfig;
  o.http.host = "127.0.0.1";
  o.http.port = 0;
  o.webhook_host = "127.0.0.1";
  o.webhook_port = 0;
  WebhookCertOptions c = Options(dir.File("certs"));
  ASSERT_EQ(::mkdir(c.cert_dir.c_str(), 0700), 0);
  c.clock = RealClock();
  c.check_interval = std::chrono::milliseconds(200);
  o.webhook_certs = c;
  SchedulerService service(o);
  ASSERT_TRUE(service.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return service.readiness().ready; }, std::chrono::seconds(20)))
      << service.readiness().reason;
  const int port = service.webhook_port();
  ASSERT_GT(port, 0);

  auto call = [&](const std::string& ca_pem, std::string path, std::string* body) -> std::string {
    const std::string ca_file = dir.File("ca.pem");
    kube::testing::ReplaceFile(ca_file, ca_pem);
    net::testing::Raw r(port);
    net::testing::TlsClientOptions t;
    t.ca_file = ca_file;
    t.server_name = "gpushare-webhook.gpushare.svc";
    if (std::string e = r.StartTls(t); !e.empty()) return "handshake: " + e;
    const std::string review =
        R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"d","object":{"spec":{"containers":[{"name":"c","resources":{"limits":{"aliyun.com/gpu-mem":"3"}}}]}}}})";
    r.Send(
        "POST " + path +
        "?timeout=10s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
        std::to_string(review.size()) + "\r\n\r\n" + review);
    net::testing::Raw::Response resp = r.Read();
    *body = resp.body;
    return std::to_string(resp.status);
  };
  std::string body;
  const CertMaterial first = SecretMaterial();
  ASSERT_EQ(call(first.ca_crt, "/mutate-pods", &body), "200") << body;
  EXPECT_NE(body.find("\"patchType\":\"JSONPatch\""), std::string::npos) << body;
  EXPECT_NE(body.find("\"uid\":\"u1\""), std::string::npos) << body;
  EXPECT_EQ(call(first.ca_crt, "/healthz", &body), "404") << body;  // nothing else on this listener

  // Rotation: the CA in the Secret becomes unusable, so the next pass issues a new CA and leaf.
  json secret = *api_.Get(Resource::kSecrets, kNs, kSecret);
  secret["data"]["ca.key"] = kube::Base64Encode("not a key");
  api_.Upsert(Resource::kSecrets, secret);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return SecretMaterial().ca_key != first.ca_key && SecretMaterial().ca_key != "not a key";
      },
      std::chrono::seconds(20)));
  const CertMaterial second = SecretMaterial();
  ASSERT_NE(second.tls_crt, first.tls_crt);
  // The new leaf is served (the TLS server reloads the files about once a second): a client
  // trusting only the new CA gets through, without a restart.
  std::string new_ca_only = second.ca_crt.substr(0, second.ca_crt.size() - first.ca_crt.size());
  ASSERT_TRUE(WaitUntil([&] { return call(new_ca_only, "/mutate-pods", &body) == "200"; },
                        std::chrono::seconds(20)))
      << call(new_ca_only, "/mutate-pods", &body);
  EXPECT_EQ(service.webhook_port(), port);
  EXPECT_EQ(Bundles(), std::vector<std::string>(2, second.ca_crt));
  service.Stop();
}

}  // namespace
}  // namespace gpushare::scheduler
