// The real binaries as child processes, for integration tests: the API-server double
// (`fake-apiserver`) and `gpushare-scheduler`, with port files, readiness waits and a
// kubeconfig pointing at the API server. Also usable by the end-to-end tests of the node
// agent's memory mode (start both binaries, then the node agent).
#pragma once

#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "tests/cli/run_process.h"
#include "tests/fakes/apiserver/kubeconfig_text.h"
#include "tests/kube/test_util.h"

namespace gpushare::scheduler::testing {

inline std::string SchedulerBinary() {
  return std::string(GPUSHARE_BIN_DIR) + "/gpushare-scheduler";
}

// Waits for a port file written atomically by the child; -1 when it does not appear.
inline int WaitForPortFile(const std::string& path, gpushare::testing::Child* child) {
  int port = -1;
  kube::testing::WaitUntil([&] {
    if (child != nullptr && child->Exited()) return true;
    const std::string text = kube::testing::ReadFile(path);
    if (text.empty()) return false;
    port = std::atoi(text.c_str());
    return port > 0;
  });
  return port;
}

// fake-apiserver on 127.0.0.1 (port 0: a free one).
class ApiServerProcess {
 public:
  ApiServerProcess(const std::string& binary, const std::string& dir, int port = 0,
                   const std::vector<std::string>& extra = {})
      : port_file_(dir + "/apiserver.port." + std::to_string(counter_++)) {
    std::vector<std::string> argv = {binary, "--listen", "127.0.0.1:" + std::to_string(port),
                                     "--port-file", port_file_};
    argv.insert(argv.end(), extra.begin(), extra.end());
    child_ = std::make_unique<gpushare::testing::Child>(argv);
    port_ = WaitForPortFile(port_file_, child_.get());
  }
  ~ApiServerProcess() { Stop(); }
  void Stop() {
    if (!child_) return;
    child_->Signal(SIGTERM);
    child_->Wait();
    child_.reset();
  }
  bool ok() const { return port_ > 0; }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  static inline int counter_ = 0;
  std::string port_file_;
  std::unique_ptr<gpushare::testing::Child> child_;
  int port_ = -1;
};

// A kubeconfig for an unauthenticated API server at `url`; returns its path.
inline std::string WriteKubeconfig(const std::string& dir, const std::string& url) {
  const std::string path = dir + "/kubeconfig";
  kube::testing::WriteFile(path, fakes::PlainKubeconfig(url));
  return path;
}

// gpushare-scheduler --listen 127.0.0.1:PORT --url-prefix /gpushare-scheduler --kubeconfig F.
class SchedulerProcess {
 public:
  SchedulerProcess(const std::string& dir, const std::string& kubeconfig, int port = 0,
                   const std::vector<std::string>& extra = {})
      : port_file_(dir + "/scheduler.port." + std::to_string(counter_++)) {
    std::vector<std::string> argv = {SchedulerBinary(), "--listen",
                                     "127.0.0.1:" + std::to_string(port), "--url-prefix",
                                     "/gpushare-scheduler", "--kubeconfig", kubeconfig,
                                     "--port-file", port_file_, "--log-level", "info",
                                     // (the tests read /metrics without a token; the listeners
                                     // are on loopback)
                                     "--metrics-auth=none"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    // With --health-listen (e.g. when the extender speaks TLS) readiness is asked there.
    const bool health = std::find(extra.begin(), extra.end(), "--health-listen") != extra.end();
    const std::string health_file = port_file_ + ".health";
    if (health) argv.insert(argv.end(), {"--health-port-file", health_file});
    child_ = std::make_unique<gpushare::testing::Child>(argv);
    port_ = WaitForPortFile(port_file_, child_.get());
    if (health) health_port_ = WaitForPortFile(health_file, child_.get());
  }
  ~SchedulerProcess() {
    if (child_) Kill();
  }
  bool ok() const { return port_ > 0; }
  int port() const { return port_; }
  int health_port() const { return health_port_; }
  std::string url_prefix(const std::string& scheme = "http") const {
    return scheme + "://127.0.0.1:" + std::to_string(port_) + "/gpushare-scheduler";
  }
  // GET /readyz until 200 (on the health listener when there is one).
  bool WaitReady(std::chrono::milliseconds limit = std::chrono::milliseconds(30000)) const {
    return kube::testing::WaitUntil(
        [&] {
          httplib::Client c("127.0.0.1", health_port_ > 0 ? health_port_ : port_);
          httplib::Result r = c.Get("/readyz");
          return r && r->status == 200;
        },
        limit);
  }
  void Kill() {
    child_->Signal(SIGKILL);
    result_ = child_->Wait();
    child_.reset();
  }
  // SIGTERM; returns the exit status.
  int Terminate() {
    child_->Signal(SIGTERM);
    result_ = child_->Wait();
    child_.reset();
    return result_.exit_code;
  }
  bool Running() { return child_ && !child_->Exited(); }
  // The process id, found as the process whose command line names this instance's port file.
  pid_t pid() const {
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string cmdline = kube::testing::ReadFile(e.path().string() + "/cmdline");
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      if (cmdline.find(" " + port_file_ + " ") != std::string::npos)
        return static_cast<pid_t>(std::stol(name));
    }
    return -1;
  }
  // Waits until the running scheduler's log (stderr) contains `text`.
  bool WaitForLog(const std::string& text, std::chrono::seconds limit = std::chrono::seconds(20)) {
    return child_ && child_->WaitForStderr(text, limit);
  }
  // The whole log, once stopped.
  const std::string& Log() const { return result_.err; }

 private:
  static inline int counter_ = 0;
  std::string port_file_;
  std::unique_ptr<gpushare::testing::Child> child_;
  gpushare::testing::ProcessResult result_;
  int port_ = -1;
  int health_port_ = -1;
};

}  // namespace gpushare::scheduler::testing
