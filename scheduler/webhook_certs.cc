#include "scheduler/webhook_certs.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/logfmt.h"
#include "kube/base64.h"
#include "kube/errors.h"

namespace gpushare::scheduler {

using logfmt::Value;
using nlohmann::json;

namespace {

constexpr int kMaxAttempts = 8;  // re-reads after 409s in one pass

struct DataKey {
  const char* key;
  std::string CertMaterial::*field;
};
constexpr DataKey kKeys[] = {{"tls.crt", &CertMaterial::tls_crt},
                             {"tls.key", &CertMaterial::tls_key},
                             {"ca.crt", &CertMaterial::ca_crt},
                             {"ca.key", &CertMaterial::ca_key}};

// The Secret's material; a value that is missing or not base64 reads as "" (unusable).
CertMaterial Decode(const json& secret) {
  CertMaterial m;
  const json* data =
      secret.contains("data") && secret["data"].is_object() ? &secret["data"] : nullptr;
  if (data == nullptr) return m;
  for (const DataKey& k : kKeys) {
    auto it = data->find(k.key);
    if (it == data->end() || !it->is_string()) continue;
    Result<std::string> v = kube::Base64Decode(it->get<std::string>());
    if (v.ok()) m.*k.field = std::move(*v);
  }
  return m;
}

void Encode(const CertMaterial& m, json& data) {
  if (!data.is_object()) data = json::object();
  for (const DataKey& k : kKeys) data[k.key] = kube::Base64Encode(m.*k.field);
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Status WriteNew(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return Status::Unavailable("cannot write " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return Status::Unavailable("cannot write " + path + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced)
    return Status::Unavailable("cannot write " + path + ": fsync: " + std::strerror(errno));
  return Status::Ok();
}

// Points `link` at `target` atomically (a temporary link renamed over it).
Status SwapLink(const std::string& target, const std::string& link) {
  const std::string tmp = link + ".tmp";
  ::unlink(tmp.c_str());
  if (::symlink(target.c_str(), tmp.c_str()) != 0 || ::rename(tmp.c_str(), link.c_str()) != 0)
    return Status::Unavailable("cannot link " + link + " -> " + target + ": " +
                               std::strerror(errno));
  return Status::Ok();
}

std::string ReadLink(const std::string& link) {
  char buf[4096];
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

}  // namespace

WebhookCertManager::WebhookCertManager(std::shared_ptr<kube::Client> client,
                                       WebhookCertOptions options)
    : client_(std::move(client)), options_(std::move(options)) {
  dns_names_ = ServiceDnsNames(options_.service_name, options_.service_namespace);
}

WebhookCertManager::~WebhookCertManager() {
  Stop();
}

int64_t WebhookCertManager::Now() const {
  return (options_.clock ? options_.clock : RealClock())->UnixNs() / 1'000'000'000;
}

WebhookCertStats WebhookCertManager::stats() const {
  MutexLock l(&mu_);
  return stats_;
}

bool WebhookCertManager::certs_in_place() const {
  struct stat a {
  }, b{};
  return ::stat(cert_file().c_str(), &a) == 0 && ::stat(key_file().c_str(), &b) == 0 &&
         a.st_size > 0 && b.st_size > 0;
}

Result<CertMaterial> WebhookCertManager::ReconcileSecret() {
  const std::string& ns = options_.secret_namespace;
  const std::string& name = options_.secret_name;
  const std::string where = "Secret " + ns + "/" + name;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    Result<json> got = client_->Get(kube::kSecrets, ns, name);
    const bool present = got.ok();
    if (!present && !kube::IsNotFound(got.status()))
      return got.status().WithContext("get " + where);
    const CertMaterial current = present ? Decode(*got) : CertMaterial{};
    const int64_t now = Now();
    const CertDecision d =
        DecideCert(InspectCertificates(current, present), dns_names_, now, options_.policy);
    {
      MutexLock l(&mu_);
      stats_.last_action = std::string(CertActionName(d.action));
    }
    if (d.action == CertAction::kKeep) return current;
    spdlog::info("event=webhook_cert_decision secret={} action={} reason={}",
                 Value(ns + "/" + name), CertActionName(d.action), Value(d.reason));
    GPUSHARE_ASSIGN_OR_RETURN(
        CertMaterial next, IssueCertificates(current, d.action, dns_names_, now, options_.policy));
    json secret;
    if (present) {
      secret = *got;  // keeps its resourceVersion: a concurrent writer makes the PUT a 409
    } else {
      secret = {{"apiVersion", "v1"},
                {"kind", "Secret"},
                {"metadata",
                 {{"name", name},
                  {"namespace", ns},
                  {"labels", {{"app.kubernetes.io/managed-by", "gpushare-scheduler"}}}}},
                {"type", "kubernetes.io/tls"}};
    }
    Encode(next, secret["data"]);
    Result<json> written = present ? client_->Update(kube::kSecrets, ns, name, secret)
                                   : client_->Create(kube::kSecrets, ns, secret);
    if (written.ok()) {
      MutexLock l(&mu_);
      ++stats_.secret_writes;
      spdlog::info("event=webhook_cert_written secret={} action={}", Value(ns + "/" + name),
                   CertActionName(d.action));
      return next;
    }
    const Status& s = written.status();
    if (s.code() == StatusCode::kAlreadyExists || kube::IsConflict(s)) {
      // Another replica wrote first: serve theirs (re-read, decide again).
      MutexLock l(&mu_);
      ++stats_.conflicts;
      spdlog::info("event=webhook_cert_conflict secret={} detail={}", Value(ns + "/" + name),
                   Value(s.message()));
      continue;
    }
    return s.WithContext(std::string(present ? "update " : "create ") + where);
  }
  return Status::Aborted(where + ": still changing after " + std::to_string(kMaxAttempts) +
                         " attempts");
}

Status WebhookCertManager::WriteFiles(const CertMaterial& m) {
  const std::string& dir = options_.cert_dir;
  if (ReadFile(cert_file()) == m.tls_crt && ReadFile(key_file()) == m.tls_key) return Status::Ok();
  // kubelet's AtomicWriter layout: DIR/..data -> ..certs-XXXXXX/{tls.crt,tls.key}, and
  // DIR/tls.crt -> ..data/tls.crt: one rename switches both files.
  std::string tmpl = dir + "/..certs-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    return Status::Unavailable("--webhook-cert-dir " + dir +
                               ": cannot create a directory: " + std::strerror(errno));
  const std::string fresh = tmpl;
  const std::string base = fresh.substr(dir.size() + 1);
  Status s = WriteNew(fresh + "/tls.crt", m.tls_crt, 0644);
  if (s.ok()) s = WriteNew(fresh + "/tls.key", m.tls_key, 0600);
  const std::string old = ReadLink(dir + "/..data");
  if (s.ok()) s = SwapLink(base, dir + "/..data");
  for (const char* f : {"tls.crt", "tls.key"})
    if (s.ok() && ReadLink(dir + "/" + f) != std::string("..data/") + f)
      s = SwapLink(std::string("..data/") + f, dir + "/" + f);
  const std::string& gone = s.ok() ? old : base;  // the directory nothing points at
  if (!gone.empty() && gone.rfind("..certs-", 0) == 0) {
    for (const char* f : {"tls.crt", "tls.key"}) ::unlink((dir + "/" + gone + "/" + f).c_str());
    ::rmdir((dir + "/" + gone).c_str());
  }
  if (!s.ok()) return s.WithContext("--webhook-cert-dir");
  MutexLock l(&mu_);
  ++stats_.file_writes;
  spdlog::info("event=webhook_cert_files_written dir={}", Value(dir));
  return Status::Ok();
}

Status WebhookCertManager::PatchConfiguration(const std::string& bundle) {
  const std::string& name = options_.configuration;
  Result<json> got = client_->Get(kube::kMutatingWebhookConfigurations, "", name);
  if (!got.ok()) {
    if (kube::IsNotFound(got.status()))
      return Status::NotFound("MutatingWebhookConfiguration " + name +
                              " does not exist (yet); its caBundle is set once it does");
    return got.status().WithContext("get MutatingWebhookConfiguration " + name);
  }
  const std::string want = kube::Base64Encode(bundle);
  json ops = json::array();
  const json& hooks = got->contains("webhooks") && (*got)["webhooks"].is_array()
                          ? (*got)["webhooks"]
                          : json::array();
  for (size_t i = 0; i < hooks.size(); ++i) {
    const json& h = hooks[i];
    const json* cc = h.is_object() && h.contains("clientConfig") ? &h["clientConfig"] : nullptr;
    if (cc != nullptr && cc->is_object() && cc->value("caBundle", json()) == want) continue;
    const std::string at = "/webhooks/" + std::to_string(i);
    ops.push_back({{"op", "test"}, {"path", at + "/name"}, {"value", h.value("name", json())}});
    if (cc != nullptr && cc->is_object())
      ops.push_back({{"op", "add"}, {"path", at + "/clientConfig/caBundle"}, {"value", want}});
    else
      ops.push_back(
          {{"op", "add"}, {"path", at + "/clientConfig"}, {"value", {{"caBundle", want}}}});
  }
  if (ops.empty()) return Status::Ok();
  Result<json> patched = client_->JsonPatch(kube::kMutatingWebhookConfigurations, "", name, ops);
  if (!patched.ok())
    return patched.status().WithContext("patch the caBundle of MutatingWebhookConfiguration " +
                                        name);
  MutexLock l(&mu_);
  ++stats_.bundle_patches;
  spdlog::info("event=webhook_ca_bundle_patched configuration={} webhooks={}", Value(name),
               ops.size() / 2);
  return Status::Ok();
}

Status WebhookCertManager::SyncOnce() {
  Status s = [this]() -> Status {
    GPUSHARE_ASSIGN_OR_RETURN(CertMaterial m, ReconcileSecret());
    GPUSHARE_RETURN_IF_ERROR(WriteFiles(m));
    return PatchConfiguration(m.ca_crt);
  }();
  MutexLock l(&mu_);
  ++stats_.passes;
  if (!s.ok()) {
    ++stats_.failures;
    stats_.last_error = s.message();
  } else {
    stats_.last_error.clear();
  }
  return s;
}

void WebhookCertManager::Start(std::function<void()> after_pass) {
  thread_ = std::thread([this, after_pass = std::move(after_pass)] { Loop(after_pass); });
}

void WebhookCertManager::Loop(std::function<void()> after_pass) {
  std::chrono::milliseconds retry{1000};
  mu_.Lock();
  while (!stopping_) {
    mu_.Unlock();
    const Status s = SyncOnce();
    if (!s.ok())
      spdlog::warn("event=webhook_cert_pass_failed retry_ms={} error={}", retry.count(),
                   Value(s.message()));
    if (after_pass) after_pass();
    mu_.Lock();
    std::chrono::milliseconds wait = options_.check_interval;
    if (s.ok()) {
      retry = std::chrono::milliseconds(1000);
    } else {
      wait = std::min(wait, retry);
      retry = std::min(retry * 2, options_.max_retry);
    }
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (!stopping_) {
      if (!cv_.WaitUntil(&mu_, deadline)) break;  // timed out: the next pass
    }
  }
  mu_.Unlock();
}

void WebhookCertManager::Stop() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gpushare::scheduler
