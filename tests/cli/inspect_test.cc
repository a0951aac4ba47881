// `gpushare inspect` as a real process against the API-server double over HTTP: kubeconfig
// with a bearer token, --context and -n honoured, $KUBECONFIG, a bad or missing kubeconfig
// refused with a clear message (exit 2), an unreachable or refusing server (exit 1), the
// kubectl plugin names, and --watch re-printing on a change and ending cleanly on SIGINT.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/cli/run_process.h"
#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/fakes/apiserver/kubeconfig_text.h"

namespace gpushare {
namespace {

using json = nlohmann::json;
using testing::Child;
using testing::RunProcess;

std::string Bin(const std::string& name = "gpushare") {
  return std::string(GPUSHARE_BIN_DIR) + "/" + name;
}

class InspectApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fakes::FakeApiServerOptions o;
    o.tokens = {"tok-good"};
    api_ = std::make_unique<fakes::FakeApiServer>(o);
    ASSERT_TRUE(api_->Start().ok());
    api_->Upsert(fakes::Resource::kNodes,
                 {{"kind", "Node"},
                  {"metadata",
                   {{"name", "gpu-a"},
                    {"annotations",
                     {{"gpushare.io/gpu-inventory",
                       R"({"version":1,"unit":"GiB","maxClientsPerGpu":48,"gpus":[{"index":0,)"
                       R"("uuid":"GPU-aaaa0000-0000-4000-8000-000000000000","model":"NVIDIA A10",)"
                       R"("memoryMiB":23028,"units":22,"health":"Healthy","mode":"memory"}]})"}}}}},
                  {"status",
                   {{"addresses", {{{"type", "InternalIP"}, {"address", "10.0.0.11"}}}},
                    {"capacity", {{"aliyun.com/gpu-mem", "22"}}}}}});
    AddPod("ml", "train", 6);
    AddPod("web", "infer", 2);
    kubeconfig_ = testing::WriteTempFile(
        "kubeconfig",
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " +
            api_->url() +
            "\nusers:\n- name: good\n  user: {token: tok-good}\n- name: bad\n  "
            "user: {token: tok-wrong}\ncontexts:\n- name: good\n  context: {cluster: "
            "c, user: good}\n- name: bad\n  context: {cluster: c, user: bad}\n"
            "current-context: bad\n");
  }
  void TearDown() override { api_->Stop(); }

  void AddPod(const std::string& ns, const std::string& name, int units) {
    api_->Upsert(
        fakes::Resource::kPods,
        {{"kind", "Pod"},
         {"metadata",
          {{"name", name},
           {"namespace", ns},
           {"annotations",
            {{"gpushare.io/gpu-mem-confirmed", R"({"c":0})"},
             {"ALIYUN_COM_GPU_MEM_ASSIGNED", "true"}}}}},
         {"spec",
          {{"nodeName", "gpu-a"},
           {"containers",
            {{{"name", "c"},
              {"resources", {{"limits", {{"aliyun.com/gpu-mem", std::to_string(units)}}}}}}}}}},
         {"status", {{"phase", "Running"}}}});
  }

  std::unique_ptr<fakes::FakeApiServer> api_;
  std::string kubeconfig_;
};

TEST_F(InspectApiTest, ContextAndNamespaceAreHonoured) {
  auto r = RunProcess({Bin(), "inspect", "--kubeconfig", kubeconfig_, "--context", "good"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("gpu-a  10.0.0.11  8/22"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("8/22 (36%)"), std::string::npos) << r.out;

  // -n ml: only ml's pods are listed and count.
  api_->ClearRequests();
  r = RunProcess({Bin(), "inspect", "--kubeconfig", kubeconfig_, "--context", "good", "-n", "ml",
                  "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["totals"]["memoryMiB"]["allocated"], 6 * 1024) << r.out;
  EXPECT_EQ(j["nodes"][0]["gpus"][0]["pods"][0]["name"], "train");
  EXPECT_EQ(api_->CountRequests("GET", "/api/v1/namespaces/ml/pods"), 1u);
  EXPECT_EQ(api_->CountRequests("GET", "/api/v1/pods"), 0u);

  // -A wins over -n.
  r = RunProcess({Bin(), "inspect", "--kubeconfig", kubeconfig_, "--context", "good", "-n", "ml",
                  "-A", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["totals"]["pods"], 2);

  // The current context's token is refused: exit 1, the server's answer named.
  r = RunProcess({Bin(), "inspect", "--kubeconfig", kubeconfig_});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("401"), std::string::npos) << r.err;

  // $KUBECONFIG is read when --kubeconfig is not given.
  r = RunProcess({Bin(), "inspect", "--context", "good", "gpu-a"}, {{"KUBECONFIG", kubeconfig_}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("gpu-a"), std::string::npos);
}

TEST_F(InspectApiTest, BadConfigurationIsAClearError) {
  const std::string garbage = testing::WriteTempFile("garbage", "clusters: [this is: not: yaml\n");
  auto r = RunProcess({Bin(), "inspect", "--kubeconfig", garbage});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no usable Kubernetes API configuration"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(garbage), std::string::npos) << r.err;

  r = RunProcess({Bin(), "inspect", "--kubeconfig", "/nonexistent/kubeconfig"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/nonexistent/kubeconfig"), std::string::npos) << r.err;

  r = RunProcess({Bin(), "inspect", "--kubeconfig", kubeconfig_, "--context", "nope"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nope"), std::string::npos) << r.err;

  r = RunProcess({Bin(), "inspect", "-o", "xml", "--kubeconfig", kubeconfig_});
  EXPECT_EQ(r.exit_code, 2);

  // A server that is not there: exit 1 within the client's timeouts.
  const std::string gone =
      testing::WriteTempFile("gone", fakes::PlainKubeconfig("http://127.0.0.1:1"));
  r = RunProcess({Bin(), "inspect", "--kubeconfig", gone});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("127.0.0.1:1"), std::string::npos) << r.err;
}

TEST_F(InspectApiTest, KubectlPluginNames) {
  // kubectl gpushare inspect ... runs kubectl-gpushare inspect ...
  auto r = RunProcess(
      {Bin("kubectl-gpushare"), "inspect", "--kubeconfig", kubeconfig_, "--context", "good"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GPU0(Allocated/Total)"), std::string::npos) << r.out;
  r = RunProcess({Bin("kubectl-gpushare"), "--help"});
  EXPECT_NE(r.out.find("kubectl gpushare"), std::string::npos) << r.out;

  // kubectl inspect gpushare ... (Alibaba's plugin name) runs kubectl-inspect-gpushare ...
  const std::string dir = ::testing::TempDir() + "/plugin-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir + "/kubectl-inspect-gpushare");
  std::filesystem::create_symlink(Bin(), dir + "/kubectl-inspect-gpushare");
  r = RunProcess(
      {dir + "/kubectl-inspect-gpushare", "-d", "--kubeconfig", kubeconfig_, "--context", "good"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("IPADDRESS:  10.0.0.11"), std::string::npos) << r.out;
}

TEST_F(InspectApiTest, WatchPrintsChangesAndStopsOnSigint) {
  Child c({Bin(), "inspect", "-w", "--kubeconfig", kubeconfig_, "--context", "good"});
  auto wait_out = [&c](const std::string& text) {
    for (int i = 0; i < 1000; ++i) {  // 20 s
      if (c.Out().find(text) != std::string::npos) return true;
      if (c.Exited()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  };
  ASSERT_TRUE(wait_out("8/22 (36%)")) << c.Out();
  AddPod("ml", "more", 4);
  ASSERT_TRUE(wait_out("12/22 (54%)")) << c.Out();
  c.Signal(SIGINT);
  bool exited = false;
  for (int i = 0; i < 500 && !exited; ++i) {  // 10 s
    exited = c.Exited();
    if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(exited) << "still running after SIGINT";
  EXPECT_EQ(c.Wait().exit_code, 0);
}

}  // namespace
}  // namespace gpushare
