// kube/authz.h against the API-server double's TokenReview and SubjectAccessReview (which
// behave like the real server's: unknown tokens are `authenticated: false`, RBAC-style grants on
// non-resource URLs for users and groups): verdicts, the TTL cache on the given clock, its
// bound, and that API failures are refused and not cached. Also the double's own validation.
#include "kube/authz.h"

#include <gtest/gtest.h>

#include <atomic>

#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/kube/test_util.h"

namespace gpushare::kube {
namespace {

using fakes::FakeApiServer;
using fakes::FakeIdentity;
using fakes::NonResourceGrant;

class AuthzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<FakeApiServer>();
    ASSERT_TRUE(server_->Start().ok());
    server_->SetIdentity("prom-token", {"system:serviceaccount:monitoring:prometheus",
                                        "u1",
                                        {"system:serviceaccounts", "system:authenticated"}});
    server_->SetIdentity("intruder-token",
                         {"system:serviceaccount:default:app", "u2", {"system:authenticated"}});
    server_->SetIdentity("ops-token", {"alice", "u3", {"ops"}});
    server_->Grant({"system:serviceaccount:monitoring:prometheus", "/metrics", "get"});
    server_->Grant({"group:ops", "/metr*", "*"});
    client_ = testing::MakeClient(server_->url());
    ASSERT_NE(client_, nullptr);
  }
  RequestAuthorizer Make(AuthorizerOptions o = {}) { return RequestAuthorizer(client_, o, clock_); }
  std::unique_ptr<FakeApiServer> server_;
  std::shared_ptr<Client> client_;
  std::shared_ptr<SimulatedClock> clock_ = std::make_shared<SimulatedClock>(1000);
};

TEST_F(AuthzTest, Verdicts) {
  RequestAuthorizer a = Make();
  AuthzDecision d = a.Check("Bearer prom-token");
  EXPECT_EQ(d.verdict, AuthzVerdict::kAllowed) << d.reason;
  EXPECT_EQ(d.user, "system:serviceaccount:monitoring:prometheus");
  EXPECT_EQ(a.Check("bearer ops-token").verdict, AuthzVerdict::kAllowed) << "a group grant";
  d = a.Check("Bearer intruder-token");
  EXPECT_EQ(d.verdict, AuthzVerdict::kForbidden);
  EXPECT_EQ(d.reason, "user system:serviceaccount:default:app may not get /metrics");
  d = a.Check("Bearer unknown");
  EXPECT_EQ(d.verdict, AuthzVerdict::kUnauthenticated);
  EXPECT_EQ(a.Check("").verdict, AuthzVerdict::kUnauthenticated);
  EXPECT_EQ(a.Check("Basic dXNlcjpwYXNz").verdict, AuthzVerdict::kUnauthenticated);
  EXPECT_EQ(a.Check("Bearer " + std::string(20000, 'x')).verdict, AuthzVerdict::kUnauthenticated);
  // The SubjectAccessReview carried the user's groups and the non-resource attributes.
  EXPECT_GE(server_->CountRequests("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews"),
            3u);
}

TEST_F(AuthzTest, CachedForTheTtlOnTheGivenClock) {
  AuthorizerOptions o;
  o.allowed_ttl = std::chrono::milliseconds(60'000);
  o.denied_ttl = std::chrono::milliseconds(10'000);
  RequestAuthorizer a = Make(o);
  EXPECT_EQ(a.Check("Bearer prom-token").verdict, AuthzVerdict::kAllowed);
  EXPECT_EQ(a.api_calls(), 2u);  // TokenReview + SubjectAccessReview
  EXPECT_TRUE(a.Check("Bearer prom-token").cached);
  EXPECT_EQ(a.Check("Bearer intruder-token").verdict, AuthzVerdict::kForbidden);
  EXPECT_EQ(a.api_calls(), 4u);
  clock_->Advance(30'000);  // the denial expired, the permission not
  EXPECT_TRUE(a.Check("Bearer prom-token").cached);
  EXPECT_FALSE(a.Check("Bearer intruder-token").cached);
  EXPECT_EQ(a.api_calls(), 6u);
  clock_->Advance(31'000);
  EXPECT_FALSE(a.Check("Bearer prom-token").cached);
}

TEST_F(AuthzTest, TheCacheIsBounded) {
  AuthorizerOptions o;
  o.max_entries = 2;
  RequestAuthorizer a = Make(o);
  for (int i = 0; i < 50; ++i) a.Check("Bearer bogus-" + std::to_string(i));
  EXPECT_EQ(a.api_calls(), 50u);  // unknown tokens: one TokenReview each
  EXPECT_TRUE(a.Check("Bearer bogus-49").cached);
  EXPECT_FALSE(a.Check("Bearer bogus-0").cached) << "the oldest entries were evicted";
}

TEST_F(AuthzTest, ApiFailuresRefuseAndAreNotCached) {
  RequestAuthorizer a = Make();
  fakes::Fault f;
  f.http_code = 500;
  f.count = 1;
  f.path_contains = "tokenreviews";
  server_->InjectFault(f);
  AuthzDecision d = a.Check("Bearer prom-token");
  EXPECT_EQ(d.verdict, AuthzVerdict::kError);
  EXPECT_NE(d.reason.find("TokenReview failed"), std::string::npos) << d.reason;
  EXPECT_EQ(a.Check("Bearer prom-token").verdict, AuthzVerdict::kAllowed) << "asked again";
}

TEST_F(AuthzTest, TheDoubleValidatesReviewsLikeTheRealServer) {
  Result<nlohmann::json> empty =
      client_->Create(kTokenReviews, "", {{"kind", "TokenReview"}, {"spec", {{"token", ""}}}});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("token is required"), std::string::npos);
  Result<nlohmann::json> nobody = client_->Create(
      kSubjectAccessReviews, "",
      {{"kind", "SubjectAccessReview"},
       {"spec", {{"nonResourceAttributes", {{"path", "/metrics"}, {"verb", "get"}}}}}});
  ASSERT_FALSE(nobody.ok());
  EXPECT_NE(nobody.status().message().find("at least one of user or group"), std::string::npos);
  Result<nlohmann::json> neither = client_->Create(
      kSubjectAccessReviews, "", {{"kind", "SubjectAccessReview"}, {"spec", {{"user", "alice"}}}});
  ASSERT_FALSE(neither.ok());
  Result<nlohmann::json> ok = client_->Create(
      kTokenReviews, "", {{"kind", "TokenReview"}, {"spec", {{"token", "prom-token"}}}});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)["status"]["user"]["username"], "system:serviceaccount:monitoring:prometheus");
}

TEST(BearerToken, Parsing) {
  EXPECT_EQ(BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(BearerToken("bearer  abc "), "abc");
  EXPECT_EQ(BearerToken("Bearer"), "");
  EXPECT_EQ(BearerToken("Basic abc"), "");
}

}  // namespace
}  // namespace gpushare::kube
