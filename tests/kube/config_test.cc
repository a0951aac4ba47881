// Configuration loading: kubeconfig variants and merging, in-cluster, precedence, and the
// rotating service-account token file.
#include "kube/config.h"

#include <gtest/gtest.h>

#include <map>

#include "kube/base64.h"
#include "kube/token.h"
#include "tests/kube/test_util.h"

namespace gpushare::kube {
namespace {

using testing::ReplaceFile;
using testing::TempDir;
using testing::WriteFile;

const char* kPem = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n";
const char* kKey = "-----BEGIN PRIVATE KEY-----\nMIIBkey\n-----END PRIVATE KEY-----\n";

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

Result<ClientConfig> LoadOne(const std::string& path, const std::string& context = "") {
  return LoadKubeconfig({{path}, true, context});
}

TEST(KubeconfigTest, TokenAndCaData) {
  TempDir d;
  WriteFile(d.File("config"), std::string(R"(apiVersion: v1
kind: Config
current-context: admin@prod
clusters:
- name: prod
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority-data: )") +
                                  Base64Encode(kPem) + R"(
contexts:
- name: admin@prod
  context: {cluster: prod, user: admin, namespace: gpu-jobs}
users:
- name: admin
  user:
    token: s3cr3t
)");
  Result<ClientConfig> c = LoadOne(d.File("config"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");  // trailing slash dropped
  EXPECT_EQ(c->ca_pem, kPem);
  EXPECT_EQ(c->token, "s3cr3t");
  EXPECT_EQ(c->namespace_, "gpu-jobs");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
  EXPECT_NE(c->source.find("context=admin@prod"), std::string::npos);
}

TEST(KubeconfigTest, FilesRelativeToTheKubeconfig) {
  TempDir d;
  WriteFile(d.File("kc/pki/ca.crt"), kPem);
  WriteFile(d.File("kc/pki/client.crt"), kPem);
  WriteFile(d.File("kc/pki/client.key"), kKey);
  WriteFile(d.File("kc/token"), "tok-from-file\n");
  WriteFile(d.File("kc/config"), R"(
current-context: c
clusters: [{name: k, cluster: {server: "https://k:443", certificate-authority: pki/ca.crt, tls-server-name: kubernetes.default.svc}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
users: [{name: u, user: {client-certificate: pki/client.crt, client-key: pki/client.key, tokenFile: token}}]
)");
  Result<ClientConfig> c = LoadOne(d.File("kc/config"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->ca_pem, kPem);
  EXPECT_EQ(c->client_cert_pem, kPem);
  EXPECT_EQ(c->client_key_pem, kKey);
  EXPECT_EQ(c->token_file, d.File("kc/token"));
  EXPECT_EQ(c->tls_server_name, "kubernetes.default.svc");
  EXPECT_EQ(c->namespace_, "default");
}

TEST(KubeconfigTest, ClientCertDataAndInsecure) {
  TempDir d;
  WriteFile(
      d.File("config"),
      "current-context: c\n"
      "clusters: [{name: k, cluster: {server: 'https://k', insecure-skip-tls-verify: true}}]\n"
      "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
      "users: [{name: u, user: {client-certificate-data: " +
          Base64Encode(kPem) + ", client-key-data: " + Base64Encode(kKey) + "}}]\n");
  Result<ClientConfig> c = LoadOne(d.File("config"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->client_cert_pem, kPem);
  EXPECT_EQ(c->client_key_pem, kKey);
  EXPECT_TRUE(c->ca_pem.empty());
}

TEST(KubeconfigTest, ContextOverrideAndAnonymousUser) {
  TempDir d;
  WriteFile(d.File("config"), R"(
current-context: a
clusters: [{name: k1, cluster: {server: "https://one"}}, {name: k2, cluster: {server: "http://two:8080"}}]
contexts: [{name: a, context: {cluster: k1, user: u}}, {name: b, context: {cluster: k2}}]
users: [{name: u, user: {token: t}}]
)");
  Result<ClientConfig> a = LoadOne(d.File("config"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->server, "https://one");
  Result<ClientConfig> b = LoadOne(d.File("config"), "b");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->server, "http://two:8080");
  EXPECT_TRUE(b->token.empty());
}

TEST(KubeconfigTest, ErrorsNameTheFileAndField) {
  TempDir d;
  struct Case {
    std::string yaml;
    std::string want;  // substring of the message
    StatusCode code;
  };
  std::string b64pem = Base64Encode(kPem);
  std::vector<Case> cases = {
      {"clusters: []\n", "current-context: not set", StatusCode::kFailedPrecondition},
      {"current-context: x\ncontexts: []\n",
       "context \"x\" (current-context): not found in contexts", StatusCode::kNotFound},
      {"current-context: c\ncontexts: [{name: c, context: {cluster: nope}}]\n",
       "contexts[name=c].context.cluster: cluster \"nope\" not found in clusters",
       StatusCode::kNotFound},
      {"current-context: c\ncontexts: [{name: c, context: {user: u}}]\n",
       "contexts[name=c].context.cluster: missing", StatusCode::kInvalidArgument},
      {"current-context: c\nclusters: [{name: k, cluster: {}}]\ncontexts: [{name: c, context: "
       "{cluster: k}}]\n",
       "clusters[name=k].cluster.server: missing", StatusCode::kInvalidArgument},
      {"current-context: c\nclusters: [{name: k, cluster: {server: 'ftp://x'}}]\ncontexts: [{name: "
       "c, context: {cluster: k}}]\n",
       "clusters[name=k].cluster.server: must start with https:// or http://",
       StatusCode::kInvalidArgument},
      {"current-context: c\nclusters: [{name: k, cluster: {server: 'https://x', "
       "certificate-authority-data: 'no*pe'}}]\n"
       "contexts: [{name: c, context: {cluster: k}}]\n",
       "clusters[name=k].cluster.certificate-authority-data: base64: invalid character",
       StatusCode::kInvalidArgument},
      {"current-context: c\nclusters: [{name: k, cluster: {server: 'https://x', "
       "certificate-authority-data: 'aGVsbG8='}}]\n"
       "contexts: [{name: c, context: {cluster: k}}]\n",
       "certificate-authority-data: does not decode to PEM", StatusCode::kInvalidArgument},
      {"current-context: c\nclusters: [{name: k, cluster: {server: 'https://x', "
       "certificate-authority: missing.crt}}]\n"
       "contexts: [{name: c, context: {cluster: k}}]\n",
       "clusters[name=k].cluster.certificate-authority: cannot read file", StatusCode::kNotFound},
      {"current-context: c\nclusters: [{name: k, cluster: {server: 'https://x', "
       "insecure-skip-tls-verify: true, "
       "certificate-authority-data: " +
           b64pem + "}}]\ncontexts: [{name: c, context: {cluster: k}}]\n",
       "cannot both be set", StatusCode::kInvalidArgument},
      {"current-context: c\nclusters: [{name: k, cluster: {server: 'https://x', "
       "insecure-skip-tls-verify: maybe}}]\n"
       "contexts: [{name: c, context: {cluster: k}}]\n",
       "insecure-skip-tls-verify: expected true or false, got \"maybe\"",
       StatusCode::kInvalidArgument},
      {"current-context: c\nclusters: [{name: k, cluster: {server: 'https://x'}}]\n"
       "contexts: [{name: c, context: {cluster: k, user: u}}]\n",
       "contexts[name=c].context.user: user \"u\" not found in users", StatusCode::kNotFound},
      {"current-context: c\nclusters: [{name: k, cluster: {server: 'https://x'}}]\n"
       "contexts: [{name: c, context: {cluster: k, user: u}}]\nusers: [{name: u, user: {exec: "
       "{command: aws}}}]\n",
       "users[name=u].user.exec: credential plugins are not supported", StatusCode::kUnimplemented},
      {"current-context: c\nclusters: [{name: k, cluster: {server: 'https://x'}}]\n"
       "contexts: [{name: c, context: {cluster: k, user: u}}]\nusers: [{name: u, user: "
       "{client-certificate-data: " +
           b64pem + "}}]\n",
       "users[name=u].user: client-certificate and client-key must be given together",
       StatusCode::kInvalidArgument},
      {"current-context: c\nclusters: [{name: k, cluster: {server: 'https://x'}}]\n"
       "contexts: [{name: c, context: {cluster: k, user: u}}]\nusers: [{name: u, user: {tokenFile: "
       "/nonexistent/tok}}]\n",
       "users[name=u].user.tokenFile: /nonexistent/tok does not exist", StatusCode::kNotFound},
      {"clusters: {a: b}\n", "clusters: expected a list", StatusCode::kInvalidArgument},
      {"clusters: [{cluster: {server: 'https://x'}}]\n", "clusters[0].name: missing",
       StatusCode::kInvalidArgument},
      {"current-context: [\n", "not valid YAML", StatusCode::kInvalidArgument},
      {"- a\n- b\n", "expected a mapping", StatusCode::kInvalidArgument},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string path = d.File("config" + std::to_string(i));
    WriteFile(path, cases[i].yaml);
    Result<ClientConfig> c = LoadOne(path);
    ASSERT_FALSE(c.ok()) << cases[i].yaml;
    EXPECT_EQ(c.status().code(), cases[i].code) << c.status().ToString();
    EXPECT_NE(c.status().message().find(cases[i].want), std::string::npos)
        << "want \"" << cases[i].want << "\" in: " << c.status().message();
    EXPECT_NE(c.status().message().find(path), std::string::npos) << c.status().message();
  }
  Result<ClientConfig> missing = LoadOne(d.File("does-not-exist"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("does-not-exist: file does not exist"),
            std::string::npos);
}

TEST(KubeconfigTest, KubeconfigListMergesFirstWins) {
  TempDir d;
  WriteFile(d.File("a"), R"(
clusters: [{name: shared, cluster: {server: "https://from-a"}}]
users: [{name: u, user: {token: token-a}}]
contexts: [{name: ctx, context: {cluster: shared, user: u}}]
)");
  WriteFile(d.File("b"), R"(
current-context: ctx
clusters: [{name: shared, cluster: {server: "https://from-b"}}, {name: only-b, cluster: {server: "https://b2"}}]
users: [{name: u, user: {token: token-b}}]
contexts: [{name: ctx, context: {cluster: only-b, user: u}}, {name: other, context: {cluster: only-b}}]
)");
  LoadOptions o;
  o.env = Env({{"KUBECONFIG", d.File("missing") + "::" + d.File("a") + ":" + d.File("b")}});
  Result<ClientConfig> c = LoadClientConfig(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  // current-context from b (a sets none), context "ctx" from a (first), cluster "shared" from a.
  EXPECT_EQ(c->server, "https://from-a");
  EXPECT_EQ(c->token, "token-a");
  o.context = "other";
  Result<ClientConfig> other = LoadClientConfig(o);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ(other->server, "https://b2");

  LoadOptions none;
  none.env = Env({{"KUBECONFIG", d.File("x") + ":" + d.File("y")}});
  Result<ClientConfig> n = LoadClientConfig(none);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kNotFound);
  EXPECT_NE(n.status().message().find("none of"), std::string::npos);
}

TEST(LoadClientConfigTest, Precedence) {
  TempDir d;
  auto kc = [&](const std::string& name, const std::string& server) {
    WriteFile(d.File(name), "current-context: c\nclusters: [{name: k, cluster: {server: '" +
                                server + "'}}]\ncontexts: [{name: c, context: {cluster: k}}]\n");
  };
  kc("flag", "https://flag");
  kc("env", "https://env");
  kc("home/.kube/config", "https://home");
  WriteFile(d.File("sa/token"), "sa-token");
  std::map<std::string, std::string> vars = {{"KUBECONFIG", d.File("env")},
                                             {"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                             {"KUBERNETES_SERVICE_PORT", "443"},
                                             {"HOME", d.File("home")}};
  LoadOptions o;
  o.in_cluster.service_account_dir = d.File("sa");
  o.kubeconfig = d.File("flag");
  o.env = Env(vars);
  EXPECT_EQ(LoadClientConfig(o)->server, "https://flag");
  o.kubeconfig.clear();
  EXPECT_EQ(LoadClientConfig(o)->server, "https://env");
  vars.erase("KUBECONFIG");
  o.env = Env(vars);
  Result<ClientConfig> ic = LoadClientConfig(o);
  ASSERT_TRUE(ic.ok()) << ic.status().ToString();
  EXPECT_EQ(ic->server, "https://10.96.0.1:443");
  vars.erase("KUBERNETES_SERVICE_HOST");
  o.env = Env(vars);
  EXPECT_EQ(LoadClientConfig(o)->server, "https://home");
  vars.erase("HOME");
  o.env = Env(vars);
  Result<ClientConfig> nothing = LoadClientConfig(o);
  ASSERT_FALSE(nothing.ok());
  EXPECT_NE(nothing.status().message().find("--kubeconfig"), std::string::npos);
  // An explicit --kubeconfig that does not exist is an error, not a fallback.
  o.kubeconfig = d.File("nope");
  EXPECT_EQ(LoadClientConfig(o).status().code(), StatusCode::kNotFound);
}

TEST(InClusterTest, ServiceAccountFiles) {
  TempDir d;
  WriteFile(d.File("sa/token"), "  the-token\n");
  WriteFile(d.File("sa/ca.crt"), kPem);
  WriteFile(d.File("sa/namespace"), "kube-system\n");
  InClusterOptions o;
  o.service_account_dir = d.File("sa");
  o.env = Env({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  Result<ClientConfig> c = LoadInClusterConfig(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.96.0.1:443");
  EXPECT_EQ(c->token_file, d.File("sa/token"));
  EXPECT_EQ(c->ca_pem, kPem);
  EXPECT_EQ(c->namespace_, "kube-system");
  EXPECT_TRUE(c->warnings.empty());

  o.env = Env({{"KUBERNETES_SERVICE_HOST", "fd00::1"}, {"KUBERNETES_SERVICE_PORT", "6443"}});
  EXPECT_EQ(LoadInClusterConfig(o)->server, "https://[fd00::1]:6443");

  std::filesystem::remove(d.File("sa/ca.crt"));
  std::filesystem::remove(d.File("sa/namespace"));
  Result<ClientConfig> noca = LoadInClusterConfig(o);
  ASSERT_TRUE(noca.ok());
  EXPECT_EQ(noca->namespace_, "default");
  ASSERT_EQ(noca->warnings.size(), 1u);
  EXPECT_NE(noca->warnings[0].find("ca.crt"), std::string::npos);

  std::filesystem::remove(d.File("sa/token"));
  Result<ClientConfig> notoken = LoadInClusterConfig(o);
  ASSERT_FALSE(notoken.ok());
  EXPECT_NE(notoken.status().message().find(d.File("sa/token")), std::string::npos);

  o.env = Env({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}});
  Result<ClientConfig> noenv = LoadInClusterConfig(o);
  ASSERT_FALSE(noenv.ok());
  EXPECT_EQ(noenv.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(noenv.status().message().find("KUBERNETES_SERVICE_PORT"), std::string::npos);
}

TEST(BearerTokenTest, RereadsTheFileOnlyWhenItChanges) {
  TempDir d;
  std::string path = d.File("token");
  WriteFile(path, "first\n");
  auto t = BearerToken::FromFile(path);
  EXPECT_EQ(*t->Get(), "first");
  EXPECT_EQ(*t->Get(), "first");
  EXPECT_EQ(t->reads(), 1);  // unchanged file: not re-read
  ReplaceFile(path, "second");
  EXPECT_EQ(*t->Get(), "second");
  EXPECT_EQ(t->reads(), 2);
  // A rotation caught half-way (empty file) keeps the last good token.
  ReplaceFile(path, "");
  EXPECT_EQ(*t->Get(), "second");
  ReplaceFile(path, "third");
  EXPECT_EQ(*t->Get(), "third");
  // Same size, rewritten in place: Reload() sees it regardless of the mtime tick.
  WriteFile(path, "fourth");
  WriteFile(path, "fifth!");
  Result<bool> changed = t->Reload();
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(*changed);
  EXPECT_EQ(*t->Get(), "fifth!");
  EXPECT_FALSE(*t->Reload());

  auto missing = BearerToken::FromFile(d.File("none"));
  Result<std::string> m = missing->Get();
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find(d.File("none")), std::string::npos);
  EXPECT_EQ(*BearerToken::Fixed("x")->Get(), "x");
}

}  // namespace
}  // namespace gpushare::kube
