// Kubelet restarts against the real gpushare-node (issue 10, point 4): every restart must lead
// to re-registration of every resource within 2 s. This is the real binary's check of that
// promise; the agent keeps it by event (inotify sees kubelet.sock created and our sockets
// deleted; its check of the files by state is 10 s away), and nothing here waits for a timer of
// the agent: each next restart is timed by the agent's own progress.
//
// The kubelet double keeps kubelet's real 10 s connect-back dial, so a Register of a socket the
// new kubelet has just deleted costs what it costs with the real kubelet. For every restart the
// tests measure the time from the new kubelet serving kubelet.sock until every resource of the
// agent is registered with a kubelet at least that new and has sent its device list (usable
// again). The bound is a liveness bound (the requirement); the figures (median, p99,
// max) are printed and recorded as test properties.
//   - AtEveryStageOfReRegistration: each next restart comes when a random number (0 to all) of
//     the resources are usable again with the current kubelet, plus a random 0-50 ms: restarts
//     land at every stage of a re-registration, and between them;
//   - ComingBackAsTheAgentServesASocket: the kubelet is down and comes back at the worst
//     moment, right after the agent created a socket and before it registered it: the new
//     kubelet's cleanup deletes that socket. Before the fix this cost 5 s (the agent's
//     self-dial) or 10 s (kubelet's dial-back) every time.
//
// GPUSHARE_RESTARTS=N runs N restarts instead of the default; GPUSHARE_RESTART_SEED=S repeats
// a sequence of intervals; GPUSHARE_AGENT_LOG=FILE keeps the agent's log.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
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

constexpr auto kBound = 2s;    // the requirement
constexpr auto kGiveUp = 30s;  // a stalled restart is measured, not waited for forever

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// Nearest-rank percentile of sorted values.
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

const std::map<std::string, int>& kMixed = testing::MixedExampleCounts();

class KubeletRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plugin_dir_ = dir_.Sub("device-plugins");
    fakes::FakeKubeletOptions ko;
    ko.plugin_dir = plugin_dir_;
    ko.dial_timeout = 10s;  // kubelet's own: a dial-back to a deleted socket costs the full 10 s
    kubelet_ = std::make_unique<FakeKubelet>(ko);
    ASSERT_TRUE(kubelet_->Start().ok());
    const char* keep = std::getenv("GPUSHARE_AGENT_LOG");
    agent_ = std::make_unique<AgentProcess>(
        std::vector<std::string>{"--inventory", testing::ExamplePath("inventory/mixed.yaml"),
                                 "--config", testing::ExamplePath("config/mixed.yaml"),
                                 "--device-plugin-dir", plugin_dir_, "--log-level", "info"},
        keep && *keep ? std::string(keep) : dir_.Sub("agent.log"));
    ASSERT_TRUE(agent_->started());
    ASSERT_TRUE(kubelet_->WaitFor([&] { return AllReadySince(kubelet_->last_start()).has_value(); },
                                  kGiveUp))
        << agent_->Log();
  }

  void TearDown() override {
    if (HasFailure()) {
      std::string log = agent_->Log();
      std::cerr << "---- agent log (tail) ----\n"
                << log.substr(log.size() > 30000 ? log.size() - 30000 : 0) << "\n";
    }
  }

  // When `r` was made usable with a kubelet started at or after `since`.
  static std::optional<Clock::time_point> ReadyAt(const std::optional<fakes::FakeResource>& r,
                                                  int n, Clock::time_point since) {
    if (!r || !r->connected || r->allocatable != n || r->ready_at == Clock::time_point{} ||
        r->ready_at < since || r->last_registered < since) {
      return std::nullopt;
    }
    return r->ready_at;
  }
  // When every resource was made usable with a kubelet started at or after `since`: the latest
  // ready_at, or nullopt while some resource is not there yet.
  std::optional<Clock::time_point> AllReadySince(Clock::time_point since) const {
    Clock::time_point last{};
    for (const auto& [name, n] : kMixed) {
      std::optional<Clock::time_point> at = ReadyAt(kubelet_->Resource(name), n, since);
      if (!at) return std::nullopt;
      last = std::max(last, *at);
    }
    return last;
  }
  // How many resources are usable with a kubelet started at or after `since`.
  size_t ReadySince(Clock::time_point since) const {
    size_t ready = 0;
    for (const auto& [name, n] : kMixed)
      ready += ReadyAt(kubelet_->Resource(name), n, since) ? 1 : 0;
    return ready;
  }

  // Checks the bound for every restart, prints and records the figures.
  void Report(const char* what, const std::vector<Clock::time_point>& starts,
              const std::vector<std::optional<Clock::time_point>>& done) {
    std::vector<double> ms;
    int over = 0;
    for (size_t i = 0; i < starts.size(); ++i) {
      double took = done[i] ? Ms(*done[i] - starts[i]) : Ms(kGiveUp);
      ms.push_back(took);
      if (!done[i] || *done[i] - starts[i] > kBound) {
        ++over;
        ADD_FAILURE() << "restart " << i + 1 << ": every resource usable again only after " << took
                      << " ms" << (done[i] ? "" : " (gave up waiting)");
      }
    }
    std::sort(ms.begin(), ms.end());
    std::cout << what << ": re-registration of " << kMixed.size() << " resources after "
              << ms.size() << " kubelet restarts: median " << Percentile(ms, 50) << " ms, p99 "
              << Percentile(ms, 99) << " ms, max " << ms.back() << " ms, over 2 s: " << over
              << "\n";
    RecordProperty("restarts", static_cast<int>(ms.size()));
    RecordProperty("median_ms", static_cast<int>(Percentile(ms, 50)));
    RecordProperty("p99_ms", static_cast<int>(Percentile(ms, 99)));
    RecordProperty("max_ms", static_cast<int>(ms.back()));
  }

  // The agent ends registered with the right counts, alive, and exits cleanly on SIGTERM.
  void ExpectServingThenCleanExit() {
    for (const auto& [name, n] : kMixed)
      EXPECT_TRUE(kubelet_->WaitForAllocatable(name, n, 10s)) << name;
    EXPECT_TRUE(agent_->Running());
    agent_->Signal(SIGTERM);
    EXPECT_EQ(agent_->Wait(20s), std::optional<int>(0));
  }

  TempDir dir_;
  std::string plugin_dir_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(KubeletRestartTest, AtEveryStageOfReRegistration) {
  const int restarts = EnvInt("GPUSHARE_RESTARTS", 60);
  const unsigned seed = static_cast<unsigned>(
      EnvInt("GPUSHARE_RESTART_SEED", static_cast<int>(std::random_device{}())));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> ready_before(0, static_cast<int>(kMixed.size()));
  std::uniform_int_distribution<int> extra_ms(0, 50);
  std::cout << "restarts=" << restarts << " seed=" << seed
            << " (GPUSHARE_RESTART_SEED repeats the sequence)\n";

  // starts[i]: when kubelet instance i+1 served kubelet.sock; done[i]: when every resource was
  // usable with instance i+1 or a later one.
  std::vector<Clock::time_point> starts;
  std::vector<std::optional<Clock::time_point>> done;
  auto settle = [&](std::optional<Clock::time_point> ready) {
    if (!ready) return;
    for (size_t i = 0; i < starts.size(); ++i) {
      if (!done[i] && starts[i] <= *ready) done[i] = *ready;
    }
  };
  for (int i = 0; i < restarts; ++i) {
    ASSERT_TRUE(kubelet_->Restart().ok());
    starts.push_back(kubelet_->last_start());
    done.emplace_back();
    // The next restart: once `want` resources are usable with this instance (or past the bound:
    // then the stall is measured as it is), and a random moment after.
    const size_t want = static_cast<size_t>(ready_before(rng));
    kubelet_->WaitFor([&] { return ReadySince(starts.back()) >= want; }, kBound);
    kubelet_->WaitFor(
        [&] {
          settle(AllReadySince(starts.back()));
          return false;  // noting progress until the moment passes
        },
        std::chrono::milliseconds(extra_ms(rng)));
    ASSERT_TRUE(agent_->Running());
  }
  // The last restart: wait for it (a stall shows up as its real length, up to kGiveUp).
  kubelet_->WaitFor([&] { return AllReadySince(starts.back()).has_value(); }, kGiveUp);
  settle(AllReadySince(starts.back()));
  Report("at every stage of re-registration", starts, done);
  ExpectServingThenCleanExit();
}

// Waits until a socket other than kubelet.sock is created in the watched directory (the agent
// serving one).
bool WaitForAgentSocket(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  alignas(inotify_event) char buf[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    ssize_t len = ::read(fd, buf, sizeof(buf));
    for (char* q = buf; len > 0 && q < buf + len;) {
      auto* ev = reinterpret_cast<inotify_event*>(q);
      q += sizeof(inotify_event) + ev->len;
      if ((ev->mask & IN_CREATE) && ev->len && std::string(ev->name) != "kubelet.sock") return true;
    }
  }
  return false;
}

TEST_F(KubeletRestartTest, ComingBackAsTheAgentServesASocket) {
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_GE(::inotify_add_watch(fd, plugin_dir_.c_str(), IN_CREATE), 0);
  std::vector<Clock::time_point> starts;
  std::vector<std::optional<Clock::time_point>> done;
  const int restarts = EnvInt("GPUSHARE_RESTARTS", 10);
  for (int i = 0; i < restarts; ++i) {
    kubelet_->Stop();  // the agent's streams end: it serves again and retries meanwhile
    ASSERT_TRUE(kubelet_->Stage().ok());
    char drain[4096];
    while (::read(fd, drain, sizeof(drain)) > 0) {
    }
    EXPECT_TRUE(WaitForAgentSocket(fd, 5s))
        << "restart " << i + 1 << ": the agent served no socket";
    ASSERT_TRUE(kubelet_->Start().ok());  // cleans (deleting that socket) and listens
    starts.push_back(kubelet_->last_start());
    kubelet_->WaitFor([&] { return AllReadySince(starts.back()).has_value(); }, kGiveUp);
    done.push_back(AllReadySince(starts.back()));
  }
  ::close(fd);
  Report("kubelet back as a socket is served", starts, done);
  ExpectServingThenCleanExit();
}

}  // namespace
}  // namespace gpushare
