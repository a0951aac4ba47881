// Helpers shared by the tests of the Kubernetes client (tests/kube): temporary directories,
// files, a client for a FakeApiServer, polling with a generous deadline, and TLS material
// generated at test time with the openssl command-line tool.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "kube/client.h"
#include "kube/config.h"

namespace gpushare::kube::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpushare-kube-XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    path_ = p != nullptr ? p : "/tmp";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void WriteFile(const std::string& path, const std::string& content) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

// Replaces a file atomically (new inode), as kubelet rotates projected tokens.
inline void ReplaceFile(const std::string& path, const std::string& content) {
  WriteFile(path + ".new", content);
  std::filesystem::rename(path + ".new", path);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Polls `pred` every few milliseconds until it holds or `deadline` passes. Used only to wait
// for asynchronous effects; the deadline is a liveness bound, generous so that it never decides a
// test on a loaded machine (60 s: the ASan build under the flake hunt's load, 2 cores and a CPU
// hog, took over 20 s for what takes 1 s alone; docs/testing.md, "Flake hunt").
inline bool WaitUntil(const std::function<bool()>& pred,
                      std::chrono::milliseconds deadline = std::chrono::milliseconds(60000)) {
  auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

// Waits until `pred` holds for as long as `progress` (a count of what the awaited work has done)
// keeps moving: gives up only when it has not moved for `stall`. A loaded machine that is slow
// but working never fails the wait (issue 30); a stuck one still does.
inline bool WaitWhileProgressing(
    const std::function<bool()>& pred, const std::function<uint64_t()>& progress,
    std::chrono::milliseconds stall = std::chrono::milliseconds(30000)) {
  uint64_t last = progress();
  auto since = std::chrono::steady_clock::now();
  while (!pred()) {
    const uint64_t now = progress();
    if (now != last) {
      last = now;
      since = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - since > stall) {
      return pred();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// A valid pod (one container "main", image busybox, 3 units of aliyun.com/gpu-mem).
inline nlohmann::json TestPod(const std::string& name, const std::string& ns = "default",
                              const std::string& node = "",
                              nlohmann::json labels = nlohmann::json::object(),
                              const std::string& phase = "Pending") {
  nlohmann::json p = {
      {"metadata", {{"name", name}, {"namespace", ns}, {"labels", std::move(labels)}}},
      {"spec",
       {{"containers",
         {{{"name", "main"},
           {"image", "busybox"},
           {"resources", {{"limits", {{"aliyun.com/gpu-mem", "3"}}}}}}}}}},
      {"status", {{"phase", phase}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}

inline std::shared_ptr<Client> MakeClient(const std::string& url, ClientOptions options = {},
                                          ClientConfig config = {}) {
  config.server = url;
  Result<std::shared_ptr<Client>> c = Client::Create(std::move(config), std::move(options));
  return c.ok() ? *c : nullptr;
}

// A CA, a server certificate for 127.0.0.1 / kubernetes.default.svc and a client certificate,
// all signed by the CA; `ok` is false when openssl is missing.
struct TlsMaterial {
  bool ok = false;
  std::string dir;
  std::string ca_crt, server_crt, server_key, client_crt, client_key, other_ca_crt;
  std::string Pem(const std::string& file) const { return ReadFile(file); }
};

inline TlsMaterial MakeTls(const TempDir& tmp) {
  TlsMaterial t;
  t.dir = tmp.path();
  auto f = [&](const char* n) { return tmp.File(n); };
  t.ca_crt = f("ca.crt");
  t.server_crt = f("server.crt");
  t.server_key = f("server.key");
  t.client_crt = f("client.crt");
  t.client_key = f("client.key");
  t.other_ca_crt = f("other-ca.crt");
  WriteFile(f("server.ext"), "subjectAltName=IP:127.0.0.1,DNS:kubernetes.default.svc\n");
  WriteFile(f("client.ext"), "extendedKeyUsage=clientAuth\n");
  std::string d = tmp.path();
  std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  std::string cmd =
      "cd " + d + " && openssl req -x509" + ec +
      " -keyout ca.key -out ca.crt -subj /CN=test-ca -days 2" + " && openssl req -x509" + ec +
      " -keyout other-ca.key -out other-ca.crt -subj /CN=other-ca -days 2" + " && openssl req" +
      ec + " -keyout server.key -out server.csr -subj /CN=127.0.0.1" +
      " && openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out "
      "server.crt -days 2 -extfile server.ext" +
      " && openssl req" + ec +
      " -keyout client.key -out client.csr -subj /CN=system:node:test/O=system:nodes" +
      " && openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out "
      "client.crt -days 2 -extfile client.ext" +
      " > openssl.log 2>&1";
  t.ok = std::system(cmd.c_str()) == 0;
  return t;
}

}  // namespace gpushare::kube::testing
