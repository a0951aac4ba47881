// See authz.h.
#include "kube/authz.h"

#include <utility>

namespace gpushare::kube {

std::string_view BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() <= kScheme.size()) return {};
  // The scheme is case-insensitive (RFC 7235).
  for (size_t i = 0; i < kScheme.size(); ++i) {
    char c = authorization[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    char k = kScheme[i];
    if (k >= 'A' && k <= 'Z') k = static_cast<char>(k - 'A' + 'a');
    if (c != k) return {};
  }
  std::string_view t = authorization.substr(kScheme.size());
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\r' || t.back() == '\n'))
    t.remove_suffix(1);
  return t;
}

RequestAuthorizer::RequestAuthorizer(std::shared_ptr<Client> client, AuthorizerOptions options,
                                     std::shared_ptr<Clock> clock)
    : client_(std::move(client)), options_(std::move(options)), clock_(std::move(clock)) {}

uint64_t RequestAuthorizer::api_calls() const {
  MutexLock l(&mu_);
  return api_calls_;
}

AuthzDecision RequestAuthorizer::Check(std::string_view authorization) {
  const std::string_view token = BearerToken(authorization);
  if (token.empty()) return {AuthzVerdict::kUnauthenticated, "", "no bearer token", false};
  if (token.size() > options_.max_token_bytes)
    return {AuthzVerdict::kUnauthenticated, "", "bearer token too long", false};
  const std::string key(token);
  {
    MutexLock l(&mu_);
    auto it = cache_.find(key);
    if (it != cache_.end() && it->second.expires_ms > clock_->NowMs()) {
      AuthzDecision d = it->second.decision;
      d.cached = true;
      return d;
    }
  }
  AuthzDecision d = Ask(key);
  if (d.verdict == AuthzVerdict::kError) return d;  // asked again next time
  const int64_t ttl = d.verdict == AuthzVerdict::kAllowed ? options_.allowed_ttl.count()
                                                          : options_.denied_ttl.count();
  MutexLock l(&mu_);
  const int64_t now = clock_->NowMs();
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    it->second = {d, now + ttl};
    return d;
  }
  while (!order_.empty() && cache_.size() >= options_.max_entries) {
    cache_.erase(order_.front());
    order_.pop_front();
  }
  if (options_.max_entries > 0) {
    cache_[key] = {d, now + ttl};
    order_.push_back(key);
  }
  return d;
}

AuthzDecision RequestAuthorizer::Ask(const std::string& token) {
  {
    MutexLock l(&mu_);
    ++api_calls_;
  }
  nlohmann::json review = {{"apiVersion", "authentication.k8s.io/v1"},
                           {"kind", "TokenReview"},
                           {"spec", {{"token", token}}}};
  Result<nlohmann::json> tr = client_->Create(kTokenReviews, "", review);
  if (!tr.ok()) {
    return {AuthzVerdict::kError, "", "TokenReview failed: " + tr.status().message(), false};
  }
  const nlohmann::json status = tr->value("status", nlohmann::json::object());
  if (!status.is_object() || !status.value("authenticated", false)) {
    std::string why = status.is_object() ? status.value("error", std::string()) : std::string();
    return {AuthzVerdict::kUnauthenticated, "",
            why.empty() ? "token not authenticated" : "token not authenticated: " + why, false};
  }
  const nlohmann::json user = status.value("user", nlohmann::json::object());
  const std::string name = user.is_object() ? user.value("username", std::string()) : "";
  if (name.empty()) return {AuthzVerdict::kUnauthenticated, "", "token names no user", false};

  nlohmann::json spec = {
      {"user", name},
      {"nonResourceAttributes", {{"path", options_.path}, {"verb", options_.verb}}}};
  if (user.contains("uid") && user["uid"].is_string()) spec["uid"] = user["uid"];
  if (user.contains("groups") && user["groups"].is_array()) spec["groups"] = user["groups"];
  if (user.contains("extra") && user["extra"].is_object()) spec["extra"] = user["extra"];
  {
    MutexLock l(&mu_);
    ++api_calls_;
  }
  nlohmann::json sar = {
      {"apiVersion", "authorization.k8s.io/v1"}, {"kind", "SubjectAccessReview"}, {"spec", spec}};
  Result<nlohmann::json> ar = client_->Create(kSubjectAccessReviews, "", sar);
  if (!ar.ok()) {
    return {AuthzVerdict::kError, name, "SubjectAccessReview failed: " + ar.status().message(),
            false};
  }
  const nlohmann::json as = ar->value("status", nlohmann::json::object());
  if (as.is_object() && as.value("allowed", false) && !as.value("denied", false))
    return {AuthzVerdict::kAllowed, name, "allowed", false};
  std::string why = as.is_object() ? as.value("reason", std::string()) : std::string();
  return {AuthzVerdict::kForbidden, name,
          "user " + name + " may not " + options_.verb + " " + options_.path +
              (why.empty() ? "" : ": " + why),
          false};
}

}  // namespace gpushare::kube
