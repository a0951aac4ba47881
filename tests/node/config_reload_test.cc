// Integration: the real gpushare-node with --config-dir (a ConfigMap-shaped directory) against
// the API-server double (the node's labels) and the kubelet double. The node's label selects the
// config at the start; a ConfigMap update (..data swapped) re-registers the resources with the
// new plan without any signal, seen by the config watch's inotify event (the poll is an hour
// away); SIGHUP reloads too. What the watch decides (a label change, a label naming no config,
// the same bytes, a refused config, a plain file, inotify unavailable) is tested in-process on a
// simulated clock (node_config_source_test: ConfigSourceTest, ConfigWatchTest).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/deviceplugin/fixtures.h"
#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/fakes/apiserver/kubeconfig_text.h"
#include "tests/fakes/kubelet/fake_kubelet.h"
#include "tests/node/agent_process.h"
#include "tests/node/configmap_dir.h"

namespace gpushare {
namespace {

using fakes::FakeKubelet;
using testing::AgentProcess;
using testing::TempDir;
using namespace std::chrono_literals;

constexpr auto kWait = 20s;

std::string Replicas(int n) {
  return "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      "
         "replicas: " +
         std::to_string(n) + "\n";
}

class ConfigReloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plugin_dir_ = dir_.Sub("device-plugins");
    kubelet_ = std::make_unique<FakeKubelet>(fakes::FakeKubeletOptions{plugin_dir_});
    ASSERT_TRUE(kubelet_->Start().ok());
    ASSERT_TRUE(api_.Start().ok());
    kubeconfig_ = dir_.Sub("kubeconfig");
    std::ofstream(kubeconfig_) << fakes::PlainKubeconfig(api_.url());
  }
  void TearDown() override {
    testing::StopAgent(agent_.get(), HasFailure());
    api_.Stop();
  }

  void Label(const std::string& value) {
    nlohmann::json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}};
    if (!value.empty()) node["metadata"]["labels"] = {{"nvidia.com/device-plugin.config", value}};
    api_.Upsert(fakes::Resource::kNodes, node);
  }

  // Kubelet's ConfigMap update: a new generation, ..data swapped by a rename.
  void Publish(const std::map<std::string, std::string>& files) { cm_.Publish(files); }

  void Start(std::vector<std::string> args) {
    std::vector<std::string> common = {
        "--inventory",
        std::string(GPUSHARE_SOURCE_DIR) + "/examples/inventory/8x-a10.yaml",
        "--device-plugin-dir",
        plugin_dir_,
        "--config-poll-interval",
        "1h",
        "--gc-interval",
        "0",
        "--log-level",
        "debug"};
    common.insert(common.end(), args.begin(), args.end());
    agent_ = std::make_unique<AgentProcess>(common, dir_.Sub("agent.log"));
    ASSERT_TRUE(agent_->started());
  }
  std::vector<std::string> DirArgs() {
    return {"--config-dir", cm_.path(), "--node-name", "n1", "--kubeconfig", kubeconfig_};
  }
  int Registrations() {
    auto r = kubelet_->Resource("nvidia.com/gpu");
    return r ? r->registrations : 0;
  }

  TempDir dir_;
  std::string plugin_dir_, kubeconfig_;
  testing::ConfigMapDir cm_{dir_.Sub("cm")};
  std::unique_ptr<FakeKubelet> kubelet_;
  fakes::FakeApiServer api_;
  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(ConfigReloadTest, AConfigMapSwapReloadsAtOnceWithoutASignal) {
  Publish({{"small", Replicas(2)}, {"big", Replicas(4)}});
  Label("small");
  Start(DirArgs());
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 16, kWait));
  EXPECT_TRUE(agent_->WaitForLog("event=config_selected config=small", kWait));
  EXPECT_TRUE(agent_->WaitForLog("event=config_watch_started", kWait));

  // The ConfigMap changes (..data swapped): the new bytes serve, by the watch's event.
  Publish({{"small", Replicas(3)}, {"big", Replicas(4)}});
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 24, kWait, 2));
  EXPECT_TRUE(agent_->WaitForLog("trigger=changed reason=\"config \\\"small\\\" changed", kWait))
      << agent_->Log();
  EXPECT_EQ(Registrations(), 2);

  // SIGHUP reloads the serving config's file.
  agent_->Signal(SIGHUP);
  ASSERT_TRUE(kubelet_->WaitForAllocatable("nvidia.com/gpu", 24, kWait, 3));
  EXPECT_TRUE(agent_->Running());
}

TEST_F(ConfigReloadTest, StartErrorsExitTwoAndSayWhy) {
  Publish({{"small", Replicas(2)}, {"big", Replicas(4)}});
  Label("huge");
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {DirArgs(),
       "node label nvidia.com/device-plugin.config=\"huge\" names a config that does not exist"},
      {{"--config-dir", cm_.path(), "--kubeconfig", kubeconfig_},
       "--node-name (or NODE_NAME): required with --config-dir"},
      {{"--config-dir", cm_.path(), "--config", cm_.path() + "/small"},
       "--config-dir (CONFIG_DIR) and --config (CONFIG_FILE) are mutually exclusive"},
      {{"--config-dir", cm_.path(), "--config-poll-interval", "0.5s"}, "--config-poll-interval"},
  };
  for (const Case& c : cases) {
    Start(c.args);
    std::optional<int> rc = agent_->Wait(kWait);
    ASSERT_TRUE(rc.has_value());
    EXPECT_EQ(*rc, 2) << agent_->Log();
    EXPECT_NE(agent_->Log().find(c.says), std::string::npos) << agent_->Log();
  }
}

}  // namespace
}  // namespace gpushare
