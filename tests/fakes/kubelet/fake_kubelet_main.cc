// fake-kubelet: the kubelet double as a small program, for trying the node agent by hand.
//
//   fake-kubelet --dir /tmp/dp [--admit nvidia.com/gpu=1]... [--restart-every 5] [--seconds 30]
//
// Serves kubelet.sock in --dir, prints every registration and every change of a resource's
// capacity/allocatable, admits one container per --admit once that resource is registered
// (printing the Allocate answer), and restarts (deleting every socket) every N seconds.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <map>
#include <thread>

#include "tests/fakes/kubelet/fake_kubelet.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) {
  g_stop = true;
}
}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/var/lib/kubelet/device-plugins";
  std::vector<std::string> admits;
  int restart_every = 0;
  int seconds = 0;
  CLI::App app{"fake-kubelet: the kubelet double (device manager side) for manual tests"};
  app.add_option("--dir", dir, "device plugin directory")->capture_default_str();
  app.add_option("--admit", admits, "RESOURCE=COUNT: admit one container once registered");
  app.add_option("--restart-every", restart_every, "restart every N seconds (0 = never)");
  app.add_option("--seconds", seconds, "exit after N seconds (0 = run until SIGINT/SIGTERM)");
  CLI11_PARSE(app, argc, argv);
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);

  gpushare::fakes::FakeKubelet kubelet({dir});
  if (auto s = kubelet.Start(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("serving %s\n", kubelet.kubelet_socket().c_str());
  std::map<std::string, std::string> last;
  std::map<std::string, bool> admitted;
  size_t logged = 0;
  auto start = std::chrono::steady_clock::now();
  auto last_restart = start;
  int n = 0;
  while (!g_stop) {
    auto log = kubelet.RegistrationLog();
    for (; logged < log.size(); ++logged) {
      const auto& e = log[logged];
      std::printf("register resource=%s endpoint=%s version=%s %s%s\n", e.resource_name.c_str(),
                  e.endpoint.c_str(), e.version.c_str(),
                  e.accepted ? "accepted" : "refused: ", e.error.c_str());
    }
    for (const auto& r : kubelet.Resources()) {
      std::string state = "capacity=" + std::to_string(r.capacity) +
                          " allocatable=" + std::to_string(r.allocatable) +
                          (r.connected ? " connected" : " disconnected");
      if (last[r.name] != state) std::printf("resource %s %s\n", r.name.c_str(), state.c_str());
      last[r.name] = state;
    }
    for (const std::string& a : admits) {
      size_t eq = a.find('=');
      std::string res = a.substr(0, eq);
      int count = eq == std::string::npos ? 1 : std::atoi(a.c_str() + eq + 1);
      auto r = kubelet.Resource(res);
      if (admitted[a] || !r || !r->connected || r->list_updates == 0) continue;
      admitted[a] = true;
      auto adm = kubelet.Admit("pod" + std::to_string(n++) + "/main", res, count);
      std::printf("admit %s -> %s %s\n", a.c_str(), adm.admitted ? "admitted" : "REJECTED",
                  adm.error.c_str());
      for (const auto& [k, v] : adm.response.envs())
        std::printf("  env %s=%s\n", k.c_str(), v.c_str());
      for (const auto& m : adm.response.mounts()) {
        std::printf("  mount %s -> %s\n", m.host_path().c_str(), m.container_path().c_str());
      }
      for (const auto& d : adm.response.devices())
        std::printf("  device %s\n", d.host_path().c_str());
      for (const auto& c : adm.response.cdi_devices()) std::printf("  cdi %s\n", c.name().c_str());
    }
    std::fflush(stdout);
    auto now = std::chrono::steady_clock::now();
    if (seconds > 0 && now - start >= std::chrono::seconds(seconds)) break;
    if (restart_every > 0 && now - last_restart >= std::chrono::seconds(restart_every)) {
      std::printf("restart\n");
      if (auto s = kubelet.Restart(); !s.ok()) std::fprintf(stderr, "%s\n", s.ToString().c_str());
      last_restart = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kubelet.Stop();
  return 0;
}
