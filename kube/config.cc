#include "kube/config.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "base/strings.h"
#include "kube/base64.h"

namespace gpushare::kube {
namespace {

bool FileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Result<std::string> ReadFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(std::string(what) + ": cannot read file " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string Resolve(const std::string& base_dir, const std::string& p) {
  if (p.empty() || p[0] == '/') return p;
  return base_dir + "/" + p;
}

bool LooksLikePem(const std::string& s) {
  return s.find("-----BEGIN") != std::string::npos;
}

// One named entry (cluster, user or context) and the file it came from.
struct Entry {
  YAML::Node body;
  std::string file;
  std::string field;  // e.g. "users[name=admin].user"
};

struct Merged {
  std::map<std::string, Entry> clusters, users, contexts;
  std::string current_context;
  std::string current_context_file;
  std::vector<std::string> files;  // the files that were read
};

Status ScalarString(const YAML::Node& map, const char* key, const std::string& field,
                    std::string* out) {
  YAML::Node v = map[key];
  if (!v || v.IsNull()) return Status::Ok();
  if (!v.IsScalar()) {
    return Status::InvalidArgument(field + "." + key + ": expected a string");
  }
  *out = v.as<std::string>();
  return Status::Ok();
}

Status ScalarBool(const YAML::Node& map, const char* key, const std::string& field, bool* out) {
  YAML::Node v = map[key];
  if (!v || v.IsNull()) return Status::Ok();
  if (!v.IsScalar()) return Status::InvalidArgument(field + "." + key + ": expected true or false");
  std::string s = v.as<std::string>();
  if (s == "true" || s == "True" || s == "TRUE") {
    *out = true;
  } else if (s == "false" || s == "False" || s == "FALSE") {
    *out = false;
  } else {
    return Status::InvalidArgument(field + "." + key + ": expected true or false, got \"" + s +
                                   "\"");
  }
  return Status::Ok();
}

// Adds the named list `list_key` (clusters/users/contexts) of one file into `out`, first wins.
Status MergeList(const YAML::Node& root, const char* list_key, const char* body_key,
                 const std::string& file, std::map<std::string, Entry>* out) {
  YAML::Node list = root[list_key];
  if (!list || list.IsNull()) return Status::Ok();
  if (!list.IsSequence()) {
    return Status::InvalidArgument(std::string(list_key) + ": expected a list");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node& item = list[i];
    std::string at = std::string(list_key) + "[" + std::to_string(i) + "]";
    if (!item.IsMap()) return Status::InvalidArgument(at + ": expected a mapping");
    std::string name;
    GPUSHARE_RETURN_IF_ERROR(ScalarString(item, "name", at, &name));
    if (name.empty()) return Status::InvalidArgument(at + ".name: missing");
    YAML::Node body = item[body_key];
    std::string field = std::string(list_key) + "[name=" + name + "]." + body_key;
    if (body && !body.IsNull() && !body.IsMap()) {
      return Status::InvalidArgument(field + ": expected a mapping");
    }
    if (out->count(name) == 0) out->emplace(name, Entry{body, file, field});
  }
  return Status::Ok();
}

Status MergeFile(const std::string& path, Merged* m) {
  GPUSHARE_ASSIGN_OR_RETURN(std::string text, ReadFile(path, "kubeconfig"));
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("kubeconfig " + path + ": not valid YAML: " + e.what());
  }
  m->files.push_back(path);
  if (!root || root.IsNull()) return Status::Ok();  // an empty file is an empty config
  if (!root.IsMap()) return Status::InvalidArgument("kubeconfig " + path + ": expected a mapping");
  auto ctx = [&](const Status& s) { return s.WithContext("kubeconfig " + path); };
  Status s = MergeList(root, "clusters", "cluster", path, &m->clusters);
  if (!s.ok()) return ctx(s);
  s = MergeList(root, "users", "user", path, &m->users);
  if (!s.ok()) return ctx(s);
  s = MergeList(root, "contexts", "context", path, &m->contexts);
  if (!s.ok()) return ctx(s);
  if (m->current_context.empty()) {
    std::string cur;
    s = ScalarString(root, "current-context", "", &cur);
    if (!s.ok()) return ctx(Status::InvalidArgument("current-context: expected a string"));
    if (!cur.empty()) {
      m->current_context = cur;
      m->current_context_file = path;
    }
  }
  return Status::Ok();
}

// Reads "<key>-data" (base64) or "<key>" (a file path relative to the kubeconfig's directory).
Status PemField(const Entry& e, const char* key, std::string* out) {
  std::string data_key = std::string(key) + "-data";
  std::string data, file;
  GPUSHARE_RETURN_IF_ERROR(ScalarString(e.body, data_key.c_str(), e.field, &data));
  GPUSHARE_RETURN_IF_ERROR(ScalarString(e.body, key, e.field, &file));
  if (!data.empty()) {
    Result<std::string> pem = Base64Decode(data);
    if (!pem.ok()) return pem.status().WithContext(e.field + "." + data_key);
    if (!LooksLikePem(*pem)) {
      return Status::InvalidArgument(e.field + "." + data_key + ": does not decode to PEM");
    }
    *out = std::move(*pem);
    return Status::Ok();
  }
  if (!file.empty()) {
    std::string path = Resolve(DirName(e.file), file);
    GPUSHARE_ASSIGN_OR_RETURN(std::string pem, ReadFile(path, e.field + "." + key));
    if (!LooksLikePem(pem)) {
      return Status::InvalidArgument(e.field + "." + key + ": " + path + " is not PEM");
    }
    *out = std::move(pem);
  }
  return Status::Ok();
}

Result<ClientConfig> BuildFromMerged(const Merged& m, const std::string& context_override,
                                     const std::string& where) {
  auto fail = [&](Status s) { return s.WithContext("kubeconfig " + where); };
  std::string ctx_name = context_override.empty() ? m.current_context : context_override;
  if (ctx_name.empty()) {
    return fail(Status::FailedPrecondition(
        "current-context: not set (set it with `kubectl config use-context`, or pass a context)"));
  }
  auto ctx_it = m.contexts.find(ctx_name);
  if (ctx_it == m.contexts.end()) {
    return fail(Status::NotFound("context \"" + ctx_name + "\"" +
                                 (context_override.empty() ? " (current-context)" : "") +
                                 ": not found in contexts"));
  }
  const Entry& ctx = ctx_it->second;
  std::string cluster_name, user_name, ns;
  Status s = ScalarString(ctx.body, "cluster", ctx.field, &cluster_name);
  if (s.ok()) s = ScalarString(ctx.body, "user", ctx.field, &user_name);
  if (s.ok()) s = ScalarString(ctx.body, "namespace", ctx.field, &ns);
  if (!s.ok()) return fail(s);
  if (cluster_name.empty()) return fail(Status::InvalidArgument(ctx.field + ".cluster: missing"));
  auto cl_it = m.clusters.find(cluster_name);
  if (cl_it == m.clusters.end()) {
    return fail(Status::NotFound(ctx.field + ".cluster: cluster \"" + cluster_name +
                                 "\" not found in clusters"));
  }
  const Entry& cl = cl_it->second;
  ClientConfig c;
  if (!ns.empty()) c.namespace_ = ns;
  c.source = "kubeconfig " + where + " context=" + ctx_name;

  // Cluster.
  s = ScalarString(cl.body, "server", cl.field, &c.server);
  if (!s.ok()) return fail(s);
  if (c.server.empty()) return fail(Status::InvalidArgument(cl.field + ".server: missing"));
  while (c.server.size() > 1 && c.server.back() == '/') c.server.pop_back();
  if (c.server.rfind("https://", 0) != 0 && c.server.rfind("http://", 0) != 0) {
    return fail(Status::InvalidArgument(
        cl.field + ".server: must start with https:// or http://, got \"" + c.server + "\""));
  }
  s = ScalarBool(cl.body, "insecure-skip-tls-verify", cl.field, &c.insecure_skip_tls_verify);
  if (s.ok()) s = ScalarString(cl.body, "tls-server-name", cl.field, &c.tls_server_name);
  if (s.ok()) s = PemField(cl, "certificate-authority", &c.ca_pem);
  if (!s.ok()) return fail(s);
  if (c.insecure_skip_tls_verify && !c.ca_pem.empty()) {
    // kubectl refuses this combination too.
    return fail(Status::InvalidArgument(
        cl.field + ": certificate-authority and insecure-skip-tls-verify=true cannot both be set"));
  }
  std::string proxy;
  if (ScalarString(cl.body, "proxy-url", cl.field, &proxy).ok() && !proxy.empty()) {
    c.warnings.push_back(cl.field + ".proxy-url: ignored (use HTTPS_PROXY)");
  }

  // User (optional: a context without a user is anonymous).
  if (!user_name.empty()) {
    auto us_it = m.users.find(user_name);
    if (us_it == m.users.end()) {
      return fail(
          Status::NotFound(ctx.field + ".user: user \"" + user_name + "\" not found in users"));
    }
    const Entry& us = us_it->second;
    for (const char* unsupported : {"exec", "auth-provider"}) {
      if (us.body[unsupported] && !us.body[unsupported].IsNull()) {
        return fail(Status::Unimplemented(us.field + "." + unsupported +
                                          ": credential plugins are not supported; use token, "
                                          "tokenFile or a client certificate"));
      }
    }
    std::string username;
    s = ScalarString(us.body, "username", us.field, &username);
    if (s.ok() && !username.empty()) {
      return fail(
          Status::Unimplemented(us.field +
                                ".username: basic authentication is not supported by "
                                "the API server any more; use a token or a client certificate"));
    }
    s = ScalarString(us.body, "token", us.field, &c.token);
    std::string token_file;
    if (s.ok()) s = ScalarString(us.body, "tokenFile", us.field, &token_file);
    if (s.ok()) s = PemField(us, "client-certificate", &c.client_cert_pem);
    if (s.ok()) s = PemField(us, "client-key", &c.client_key_pem);
    if (!s.ok()) return fail(s);
    if (!token_file.empty()) {
      c.token_file = Resolve(DirName(us.file), token_file);
      if (!FileExists(c.token_file)) {
        return fail(Status::NotFound(us.field + ".tokenFile: " + c.token_file + " does not exist"));
      }
    }
    if (c.client_cert_pem.empty() != c.client_key_pem.empty()) {
      return fail(Status::InvalidArgument(
          us.field + ": client-certificate and client-key must be given together"));
    }
  }
  return c;
}

std::vector<std::string> SplitPathList(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    if (ch == ':') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

std::string JoinPaths(const std::vector<std::string>& v) {
  return Join(v, ":");
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Result<ClientConfig> LoadInClusterConfig(const InClusterOptions& options) {
  EnvLookup env = options.env ? options.env : ProcessEnv();
  std::optional<std::string> host = env("KUBERNETES_SERVICE_HOST");
  std::optional<std::string> port = env("KUBERNETES_SERVICE_PORT");
  if (!host || host->empty() || !port || port->empty()) {
    return Status::FailedPrecondition(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set "
        "(not running in a pod? pass --kubeconfig)");
  }
  ClientConfig c;
  std::string h = *host;
  if (h.find(':') != std::string::npos && h.front() != '[') h = "[" + h + "]";  // IPv6
  c.server = "https://" + h + ":" + *port;
  std::string dir = options.service_account_dir;
  c.token_file = dir + "/token";
  if (!FileExists(c.token_file)) {
    return Status::NotFound("in-cluster config: service-account token " + c.token_file +
                            " does not exist (is automountServiceAccountToken off?)");
  }
  Result<std::string> ca = ReadFile(dir + "/ca.crt", "in-cluster config");
  if (ca.ok() && LooksLikePem(*ca)) {
    c.ca_pem = std::move(*ca);
  } else {
    c.warnings.push_back("in-cluster config: " + dir +
                         "/ca.crt missing or not PEM; using the system trust store");
  }
  Result<std::string> ns = ReadFile(dir + "/namespace", "in-cluster config");
  if (ns.ok() && !Trim(*ns).empty()) c.namespace_ = Trim(*ns);
  c.source = "in-cluster " + c.server;
  return c;
}

Result<ClientConfig> LoadKubeconfig(const KubeconfigOptions& options) {
  if (options.paths.empty()) return Status::InvalidArgument("kubeconfig: no file given");
  Merged m;
  for (const std::string& p : options.paths) {
    if (!FileExists(p)) {
      if (options.explicit_path || options.paths.size() == 1) {
        return Status::NotFound("kubeconfig " + p + ": file does not exist");
      }
      continue;  // kubectl skips missing files in KUBECONFIG
    }
    GPUSHARE_RETURN_IF_ERROR(MergeFile(p, &m));
  }
  if (m.files.empty()) {
    return Status::NotFound("kubeconfig: none of " + JoinPaths(options.paths) + " exists");
  }
  return BuildFromMerged(m, options.context, JoinPaths(m.files));
}

Result<ClientConfig> LoadClientConfig(const LoadOptions& options) {
  EnvLookup env = options.env ? options.env : ProcessEnv();
  if (!options.kubeconfig.empty()) {
    return LoadKubeconfig({{options.kubeconfig}, /*explicit_path=*/true, options.context});
  }
  if (std::optional<std::string> kc = env("KUBECONFIG"); kc && !SplitPathList(*kc).empty()) {
    return LoadKubeconfig({SplitPathList(*kc), false, options.context});
  }
  std::optional<std::string> host = env("KUBERNETES_SERVICE_HOST");
  if (host && !host->empty()) {
    InClusterOptions ic = options.in_cluster;
    if (!ic.env) ic.env = env;
    return LoadInClusterConfig(ic);
  }
  std::optional<std::string> home = env("HOME");
  if (home && !home->empty()) {
    std::string path = *home + "/.kube/config";
    if (FileExists(path)) return LoadKubeconfig({{path}, false, options.context});
  }
  return Status::NotFound(
      "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, run in a pod, or create "
      "~/.kube/config");
}

}  // namespace gpushare::kube
