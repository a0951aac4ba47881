// RequestAuthorizer: who may read an HTTP endpoint of ours, decided by the API server, the way
// kubelet and kube-rbac-proxy protect /metrics: the caller's bearer token is checked with a
// TokenReview (authentication.k8s.io/v1), and the user it names with a SubjectAccessReview
// (authorization.k8s.io/v1) for a non-resource URL and verb (e.g. "get" "/metrics"). Prometheus
// is allowed by binding a ClusterRole with `nonResourceURLs: ["/metrics"], verbs: ["get"]` to its
// ServiceAccount (the chart's <release>-metrics-reader).
//
// Decisions are cached per token, with a TTL on the clock passed in (allowed and denied answers
// have their own TTLs, as kubelet's webhook authenticator/authorizer do), in a bounded cache
// (the least recently inserted entry goes first), so a scrape every 15 s costs two API calls a
// few times an hour, and a flood of bad tokens cannot grow memory. An API error is not cached
// (the next request asks again) and refuses the request (fail closed). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/sync.h"
#include "kube/client.h"

namespace gpushare::kube {

inline constexpr ResourceRef kTokenReviews{"tokenreviews", false, "authentication.k8s.io/v1"};
inline constexpr ResourceRef kSubjectAccessReviews{"subjectaccessreviews", false,
                                                   "authorization.k8s.io/v1"};

struct AuthorizerOptions {
  std::string path = "/metrics";  // the nonResourceURL asked about
  std::string verb = "get";
  std::chrono::milliseconds allowed_ttl{120'000};
  std::chrono::milliseconds denied_ttl{30'000};
  size_t max_entries = 1024;
  size_t max_token_bytes = 16 * 1024;  // longer is refused without asking
};

enum class AuthzVerdict {
  kAllowed,
  kUnauthenticated,  // no token, or the API server does not know it (HTTP 401)
  kForbidden,        // a known user without the permission (HTTP 403)
  kError,            // the API server could not be asked (HTTP 503; not cached)
};

struct AuthzDecision {
  AuthzVerdict verdict = AuthzVerdict::kError;
  std::string user;    // the authenticated user, when known
  std::string reason;  // for the log and the response body
  bool cached = false;
};

// The token of an "Authorization: Bearer <token>" header value; "" when it is not one.
std::string_view BearerToken(std::string_view authorization);

class RequestAuthorizer {
 public:
  // `clock` times the cached answers (NowMs).
  RequestAuthorizer(std::shared_ptr<Client> client, AuthorizerOptions options,
                    std::shared_ptr<Clock> clock);

  // `authorization` is the request's Authorization header value ("" when absent).
  AuthzDecision Check(std::string_view authorization) GPUSHARE_EXCLUDES(mu_);

  // API calls made so far (TokenReviews + SubjectAccessReviews), for tests.
  uint64_t api_calls() const GPUSHARE_EXCLUDES(mu_);

 private:
  struct Entry {
    AuthzDecision decision;
    int64_t expires_ms = 0;
  };
  AuthzDecision Ask(const std::string& token);

  std::shared_ptr<Client> client_;
  const AuthorizerOptions options_;
  const std::shared_ptr<Clock> clock_;
  mutable Mutex mu_;
  std::map<std::string, Entry> cache_ GPUSHARE_GUARDED_BY(mu_);
  std::deque<std::string> order_ GPUSHARE_GUARDED_BY(mu_);  // insertion order, for eviction
  uint64_t api_calls_ GPUSHARE_GUARDED_BY(mu_) = 0;
};

}  // namespace gpushare::kube
