// Runs the real `gpushare simulate` binary (GPUSHARE_BIN_DIR) on small inputs.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace {

const std::string kBin = std::string(GPUSHARE_BIN_DIR) + "/gpushare";

struct Proc {
  int rc = -1;
  std::string out;
};

Proc Exec(const std::string& args) {
  Proc r;
  const std::string cmd = kBin + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Write(const std::string& path, const std::string& content) {
  std::ofstream(path) << content;
}

class SimulateCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    struct stat st;
    ASSERT_EQ(stat(kBin.c_str(), &st), 0) << kBin << " not built";
    dir_ = ::testing::TempDir() + "/simulate_cli_test_" + std::to_string(::getpid());
    ASSERT_EQ(system(("rm -rf " + dir_ + " && mkdir -p " + dir_).c_str()), 0);
    std::string nodes = "sn,cpu_milli,memory_mib,gpu,model\n";
    for (int i = 0; i < 12; ++i)
      nodes += "node-" + std::to_string(i) + "," +
               (i % 3 ? "96000,393216,8,G2" : "104000,524288,2,T4") + "\n";
    Write(dir_ + "/nodes.csv", nodes);
    std::string pods =
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_"
        "time,"
        "scheduled_time\n";
    const char* shapes[] = {"3150,0,1,810,",   "11300,0,1,1000,", "11910,0,1,470,",
                            "12500,0,0,0,",    "4000,0,1,320,T4", "8000,0,1,650,",
                            "22000,0,2,1000,", "11400,0,1,1000,"};
    for (int i = 0; i < 120; ++i)
      pods += "pod-" + std::to_string(i) + "," + shapes[i % 8] + ",LS,Running," +
              std::to_string(i * 10) + "," + std::to_string(i * 10 + 400) + ",\n";
    Write(dir_ + "/pods.csv", pods);
  }
  void TearDown() override {
    if (!dir_.empty()) (void)system(("rm -rf " + dir_).c_str());
  }
  std::string dir_;
};

TEST_F(SimulateCliTest, StaticRunWritesCurvesSummaryPlotAndTable) {
  const Proc r = Exec("simulate --nodes " + dir_ + "/nodes.csv --pods " + dir_ +
                      "/pods.csv --policy fgd,default" + " --seeds 1-2 --tune 1.3 --out " + dir_ +
                      "/out --jobs 2 --quiet");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("unallocated GPU %"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fgd"), std::string::npos);
  EXPECT_NE(r.out.find("default"), std::string::npos);
  EXPECT_NE(r.out.find("130%"), std::string::npos);
  const std::string curves = Slurp(dir_ + "/out/curves.csv");
  ASSERT_EQ(curves.rfind("policy,seed,arrived_pct,unallocated_pct,frag_pct\n", 0), 0u);
  for (const char* key : {"\nfgd,1,100,", "\nfgd,2,100,", "\ndefault,1,130,", "\ndefault,2,50,"})
    EXPECT_NE(curves.find(key), std::string::npos) << key;
  const std::string summary = Slurp(dir_ + "/out/summary.csv");
  ASSERT_EQ(summary.rfind("policy,arrived_pct,unallocated_pct_median\n", 0), 0u);
  EXPECT_NE(summary.find("\ndefault,100,"), std::string::npos);
  const std::string svg = Slurp(dir_ + "/out/plot.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  // Nothing fails early on: at 30% arrived, about 70% is unallocated in every run.
  for (const char* key : {"\nfgd,1,30,", "\ndefault,2,30,"}) {
    const size_t at = curves.find(key);
    ASSERT_NE(at, std::string::npos) << key;
    EXPECT_NEAR(std::stod(curves.substr(at + std::string(key).size())), 70.0, 1.5) << key;
  }
}

TEST_F(SimulateCliTest, DynamicMode) {
  const Proc r =
      Exec("simulate --nodes " + dir_ + "/nodes.csv --pods " + dir_ + "/pods.csv --policy default" +
           " --seeds 3 --mode dynamic --out " + dir_ + "/dyn --quiet");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("dynamic replay"), std::string::npos) << r.out;
  EXPECT_EQ(
      Slurp(dir_ + "/dyn/dynamic_summary.csv").rfind("policy,seed,time_weighted_alloc_pct", 0), 0u);
  EXPECT_NE(Slurp(dir_ + "/dyn/dynamic.csv").find("\ndefault,3,"), std::string::npos);
}

TEST_F(SimulateCliTest, BuiltInDefaultComparesSharingWithWholeGpus) {
  const Proc r = Exec("simulate --policy fgd,default --seeds 1 --out " + dir_ + "/builtin --quiet");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("built-in default"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("with sharing (default)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("whole GPUs only"), std::string::npos) << r.out;
}

TEST_F(SimulateCliTest, MalformedInputIsAnErrorWithItsLocation) {
  Write(dir_ + "/bad.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,0,1,500\np2,1000,0,two,500\n");
  const Proc r = Exec("simulate --nodes " + dir_ + "/nodes.csv --pods " + dir_ +
                      "/bad.csv --seeds 1 --out " + dir_ + "/bad --quiet");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find(dir_ + "/bad.csv:3:11: num_gpu: expected an integer, got 'two'"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(Exec("simulate --policy tetris --quiet").rc, 2);
  EXPECT_EQ(Exec("simulate --seeds 9-1 --quiet").rc, 2);
  EXPECT_EQ(Exec("simulate --nodes " + dir_ + "/nodes.csv --quiet").rc, 2);
  EXPECT_NE(Exec("simulate --mode sideways --quiet").rc, 0);
}

}  // namespace
