// Soak of the real gpushare-node against the kubelet double (issue 10, point 6): for a bounded
// time (GPUSHARE_SOAK_SECONDS, default 25) kubelet restarts every 0.3-0.8 s while containers are
// admitted and released (GetPreferredAllocation + Allocate on every resource) and XIDs make a
// GPU unhealthy and healthy again (ListAndWatch updates). The agent's resident memory, open
// descriptors and threads are sampled from /proc/<pid> every 250 ms; after a warm-up (the first
// third of the run) they must stay flat: no growth from the middle third to the last beyond a
// small slack (a leak per restart, per admission or per registration shows up as a climb over
// the ~30 restarts of the last two thirds). At the end the agent must be registered with the
// right counts, admit a container, and exit cleanly on SIGTERM.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "tests/deviceplugin/fixtures.h"
#include "tests/fakes/kubelet/fake_kubelet.h"
#include "tests/node/agent_process.h"

namespace gpushare {
namespace {

using Clock = std::chrono::steady_clock;
using fakes::FakeKubelet;
using testing::AgentProcess;
using testing::TempDir;
using namespace std::chrono_literals;

const std::map<std::string, int>& kMixed = testing::MixedExampleCounts();
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// GPU 1 of examples/inventory/mixed.yaml (time-sliced as nvidia.com/gpu.shared).
constexpr const char* kFlakyGpu = "GPU-9a7bbd4e-61f3-ebb3-5ac3-1b486deb0cdb";

struct Sample {
  double at_s = 0;
  long rss_kb = 0;
  int fds = 0;
  int threads = 0;
};

std::optional<Sample> Take(pid_t pid, Clock::time_point t0) {
  Sample s;
  s.at_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  if (!status) return std::nullopt;
  for (std::string line; std::getline(status, line);) {
    std::istringstream in(line);
    std::string key;
    in >> key;
    if (key == "VmRSS:") in >> s.rss_kb;
    if (key == "Threads:") in >> s.threads;
  }
  DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (d == nullptr) return std::nullopt;
  while (dirent* e = ::readdir(d)) s.fds += e->d_name[0] != '.';
  ::closedir(d);
  return s;
}

// What the agent's log (at info) says of the XIDs injected for `uuid`: each one the agent
// handles logs either the GPU's transition to Unhealthy or health_event_ignored (already
// unhealthy: the XID only extends the unhealthy time); the recovery logs a transition to Healthy.
struct XidProgress {
  int handled = 0;
  bool recovered_after_last = false;  // a Healthy transition after the last handled XID
};

XidProgress ReadXidProgress(const std::string& log, const std::string& uuid) {
  XidProgress p;
  std::istringstream in(log);
  const std::string transition = "event=health_transition uuid=" + uuid + " ";
  const std::string ignored = "event=health_event_ignored uuid=" + uuid + " ";
  for (std::string line; std::getline(in, line);) {
    const bool is_transition = line.find(transition) != std::string::npos;
    if (line.find(ignored) != std::string::npos ||
        (is_transition && line.find("state=Unhealthy") != std::string::npos)) {
      ++p.handled;
      p.recovered_after_last = false;
    } else if (is_transition && line.find("state=Healthy") != std::string::npos) {
      p.recovered_after_last = true;
    }
  }
  return p;
}

template <typename F>
std::vector<long> Column(const std::vector<Sample>& v, F f) {
  std::vector<long> out;
  for (const Sample& s : v) out.push_back(static_cast<long>(f(s)));
  return out;
}

long Max(std::vector<long> v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}
long Median(std::vector<long> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(AgentSoakTest, RestartsAndTrafficLeaveMemoryDescriptorsAndThreadsFlat) {
  const char* env = std::getenv("GPUSHARE_SOAK_SECONDS");
  const int seconds = env && *env ? std::max(6, std::atoi(env)) : 25;
  TempDir dir;
  const std::string plugin_dir = dir.Sub("device-plugins");
  const std::string events = dir.Sub("events");
  std::ofstream(events).flush();
  fakes::FakeKubeletOptions ko;
  ko.plugin_dir = plugin_dir;
  FakeKubelet kubelet(ko);
  ASSERT_TRUE(kubelet.Start().ok());
  AgentProcess agent({"--inventory", testing::ExamplePath("inventory/mixed.yaml"), "--config",
                      testing::ExamplePath("config/mixed.yaml"), "--device-plugin-dir", plugin_dir,
                      "--health-events", events, "--recover-after", "1s", "--log-level", "info"},
                     dir.Sub("agent.log"));
  ASSERT_TRUE(agent.started());
  for (const auto& [name, n] : kMixed)
    ASSERT_TRUE(kubelet.WaitForAllocatable(name, n, 15s)) << name;

  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::seconds(seconds);
  std::atomic<bool> stop{false};
  std::atomic<int> restarts{0}, admitted{0}, refused{0}, xids{0};
  std::vector<std::string> problems;
  std::mutex problems_mu;
  auto problem = [&](std::string p) {
    std::lock_guard<std::mutex> lock(problems_mu);
    if (problems.size() < 20) problems.push_back(std::move(p));
  };

  std::thread restarter([&] {
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> gap(300, 800);
    while (!stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(gap(rng)));
      if (stop) break;
      if (!kubelet.Restart().ok()) problem("kubelet restart failed");
      restarts++;
    }
  });
  std::thread traffic([&] {
    std::mt19937 rng(2);
    std::vector<std::string> names;
    for (const auto& [name, n] : kMixed) names.push_back(name);
    std::vector<std::string> held;
    for (int i = 0; !stop; ++i) {
      const std::string& res = names[rng() % names.size()];
      const std::string container = "soak-" + std::to_string(i) + "/main";
      fakes::Admission a = kubelet.Admit(container, res, 1);
      if (a.admitted) {
        admitted++;
        if (a.response.envs().count("NVIDIA_VISIBLE_DEVICES") == 0) {
          problem(res + ": Allocate without NVIDIA_VISIBLE_DEVICES");
        }
        held.push_back(container);
      } else {
        refused++;  // not registered at this moment (a restart), or no device free
        kubelet.Release(container);
      }
      if (held.size() > 4) {  // the pod finished
        kubelet.Release(held.front());
        held.erase(held.begin());
      }
      std::this_thread::sleep_for(5ms);
    }
    for (const std::string& c : held) kubelet.Release(c);
  });
  std::thread health([&] {
    while (!stop) {
      std::this_thread::sleep_for(1500ms);
      std::ofstream(events, std::ios::app) << "xid=79 uuid=" << kFlakyGpu << "\n";
      xids++;
    }
  });

  std::vector<Sample> samples;
  while (Clock::now() < end && agent.Running()) {
    if (auto s = Take(agent.pid(), t0)) samples.push_back(*s);
    std::this_thread::sleep_for(250ms);
  }
  stop = true;
  restarter.join();
  traffic.join();
  health.join();
  ASSERT_TRUE(agent.Running()) << agent.Log();
  for (const std::string& p : problems) ADD_FAILURE() << p;

  // Flat after the warm-up: the last third against the middle third.
  ASSERT_GE(samples.size(), 12u);
  const size_t third = samples.size() / 3;
  std::vector<Sample> warm(samples.begin(), samples.begin() + third);
  std::vector<Sample> mid(samples.begin() + third, samples.begin() + 2 * third);
  std::vector<Sample> last(samples.begin() + 2 * third, samples.end());
  auto rss = [](const Sample& s) { return s.rss_kb; };
  auto fds = [](const Sample& s) { return s.fds; };
  auto threads = [](const Sample& s) { return s.threads; };
  std::cout << "soak " << seconds << " s: " << restarts << " kubelet restarts, " << admitted
            << " admissions (" << refused << " refused while re-registering), " << xids << " XIDs\n"
            << "  rss kB median: warm-up " << Median(Column(warm, rss)) << ", middle "
            << Median(Column(mid, rss)) << ", last " << Median(Column(last, rss)) << "\n"
            << "  fds max: middle " << Max(Column(mid, fds)) << ", last " << Max(Column(last, fds))
            << "; threads max: middle " << Max(Column(mid, threads)) << ", last "
            << Max(Column(last, threads)) << "\n";
  ::testing::Test::RecordProperty("restarts", restarts.load());
  ::testing::Test::RecordProperty("rss_kb_last_median",
                                  static_cast<int>(Median(Column(last, rss))));
  ::testing::Test::RecordProperty("fds_last_max", static_cast<int>(Max(Column(last, fds))));
  ::testing::Test::RecordProperty("threads_last_max", static_cast<int>(Max(Column(last, threads))));
  // Slack for what is in flight at a sample (a restart's re-registration: a connection and a
  // stream handler per resource); a leak per restart exceeds it within a dozen restarts.
  EXPECT_LE(Max(Column(last, fds)), Max(Column(mid, fds)) + 8) << "descriptors climb";
  EXPECT_LE(Max(Column(last, threads)), Max(Column(mid, threads)) + 8) << "threads climb";
  if (!kSanitized) {
    // About 0.1-0.2 MiB from the middle third to the last on a healthy agent (allocator arenas
    // settling); 1.5 MiB is the limit. Under ASan the quarantine of freed memory (up to 256 MiB)
    // grows by design; there LeakSanitizer checks the agent at exit instead (exit status 0).
    EXPECT_LE(Median(Column(last, rss)), Median(Column(mid, rss)) + 1536)
        << "resident memory climbs";
  }
  EXPECT_GE(restarts.load(), seconds) << "the soak restarted kubelet too rarely to mean anything";
  EXPECT_GE(admitted.load(), 10 * seconds / 2) << "too little traffic got through";

  // No XID comes any more. Wait until the agent has handled every one injected and the GPU has
  // recovered from the last (--recover-after 1s): from then on the agent's view stays healthy.
  const int injected = xids.load();
  XidProgress progress;
  const auto handled_by = Clock::now() + 60s;
  while (Clock::now() < handled_by) {
    progress = ReadXidProgress(agent.Log(), kFlakyGpu);
    if (progress.handled >= injected && progress.recovered_after_last) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(progress.handled, injected) << "XIDs the agent logged as handled";
  EXPECT_TRUE(progress.recovered_after_last) << "no recovery logged after the last XID";

  // Ends registered with the right counts and every device healthy in kubelet's view, admitting.
  for (const auto& [name, n] : kMixed) {
    EXPECT_TRUE(kubelet.WaitFor(
        [&] {
          auto r = kubelet.Resource(name);
          return r && r->connected && r->capacity == n && r->allocatable == n &&
                 r->list_updates > 0;
        },
        15s))
        << name << ": " << (kubelet.Resource(name) ? kubelet.Resource(name)->capacity : -1)
        << " devices, " << (kubelet.Resource(name) ? kubelet.Resource(name)->allocatable : -1)
        << " allocatable";
  }
  for (const auto& [name, n] : kMixed) {
    fakes::Admission a = kubelet.Admit("final-" + name + "/main", name, 1);
    EXPECT_TRUE(a.admitted) << name << ": " << a.error;
  }
  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(20s), std::optional<int>(0));
  if (::testing::Test::HasFailure()) {
    std::string log = agent.Log();
    std::cerr << "---- agent log (tail) ----\n"
              << log.substr(log.size() > 20000 ? log.size() - 20000 : 0) << "\n";
  }
}

}  // namespace
}  // namespace gpushare
