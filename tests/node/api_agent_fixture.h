// ApiAgentTest: the real gpushare-node (AgentProcess) serving node "n1" beside the kubelet double
// (with its PodResources socket) and the API-server double (holding Node n1), for the tests of
// what the agent does through the API: gpushare.io/allocations, GPU choices.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "tests/deviceplugin/fixtures.h"
#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/fakes/apiserver/kubeconfig_text.h"
#include "tests/fakes/kubelet/fake_kubelet.h"
#include "tests/node/agent_process.h"

namespace gpushare::testing {

class ApiAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plugin_dir_ = dir_.Sub("device-plugins");
    fakes::FakeKubeletOptions ko{plugin_dir_};
    ko.pod_resources_socket = PodResourcesSocket();
    kubelet_ = std::make_unique<fakes::FakeKubelet>(ko);
    ASSERT_TRUE(kubelet_->Start().ok());
    ASSERT_TRUE(api_.Start().ok());
    kubeconfig_ = dir_.Sub("kubeconfig");
    std::ofstream(kubeconfig_) << fakes::PlainKubeconfig(api_.url());
    api_.Upsert(fakes::Resource::kNodes, {{"kind", "Node"}, {"metadata", {{"name", "n1"}}}});
  }
  void TearDown() override {
    StopAgent();
    if (HasFailure()) std::cerr << "---- agent log ----\n" << log_ << "-------------------\n";
    api_.Stop();
  }

  // Starts gpushare-node for n1 on the doubles; `extra` flags go last.
  void StartAgent(const std::string& inventory, const std::string& config,
                  const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--inventory",
                                     inventory,
                                     "--config",
                                     config,
                                     "--device-plugin-dir",
                                     plugin_dir_,
                                     "--node-name",
                                     "n1",
                                     "--kubeconfig",
                                     kubeconfig_,
                                     "--pod-resources-socket",
                                     PodResourcesSocket(),
                                     "--gc-interval",
                                     "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    agent_ =
        std::make_unique<AgentProcess>(args, dir_.Sub("agent." + std::to_string(runs_++) + ".log"));
    ASSERT_TRUE(agent_->started());
  }
  // SIGTERM, then keeps its log (log_ has every run's).
  void StopAgent() {
    if (agent_ && agent_->Running()) {
      agent_->Signal(SIGTERM);
      agent_->Wait(std::chrono::seconds(10));
    }
    if (agent_) log_ += agent_->Log();
    agent_.reset();
  }
  std::string PodResourcesSocket() { return dir_.Sub("pod-resources") + "/kubelet.sock"; }

  TempDir dir_;
  std::string plugin_dir_, kubeconfig_, log_;
  std::unique_ptr<fakes::FakeKubelet> kubelet_;
  fakes::FakeApiServer api_;
  std::unique_ptr<AgentProcess> agent_;
  int runs_ = 0;
};

}  // namespace gpushare::testing
