// The inspect view as data (tests/testdata/inspect/*.txt, docs/testing.md): API objects in
// (YAML, as `kubectl get nodes,pods,events -A -o yaml` prints them), every output form of
// `gpushare inspect` out. Commands:
//   inspect [d] [o=wide|json|yaml] [node=NAME] [namespace=NS]
//       the input is the objects; prints what `gpushare inspect -f FILE` prints with those flags
//       (d: -d), or `error:` and the message when the objects are refused.
#include <gtest/gtest.h>

#include "cli/gpushare/inspect_text.h"
#include "kube/inspect_view.h"
#include "tests/datadriven.h"

namespace gpushare {
namespace {

using datadriven::Case;
namespace iv = kube::inspect;
namespace text = cli::inspect;

std::string RunInspect(const Case& c) {
  Result<iv::Input> in = iv::ParseObjects(c.input, "input");
  if (!in.ok()) return "error: " + in.status().message() + "\n";
  iv::Filter f;
  f.node = c.Value("node").value_or("");
  f.namespace_ = c.Value("namespace").value_or("");
  const iv::View v = iv::Build(*in, f);
  const std::string o = c.Value("o").value_or("");
  if (o == "json") return iv::ToJson(v).dump(2) + "\n";
  if (o == "yaml") return text::ToYaml(iv::ToJson(v));
  if (o == "wide") return text::Wide(v);
  return c.Has("d") ? text::Detail(v) : text::Table(v);
}

std::string RunCase(const Case& c) {
  if (c.command == "inspect") return RunInspect(c);
  return "unknown command \"" + c.command + "\" (inspect)\n";
}

const std::string kDataDir = std::string(GPUSHARE_SOURCE_DIR) + "/tests/testdata/inspect";

class InspectData : public ::testing::TestWithParam<std::string> {};

TEST_P(InspectData, File) {
  const int n = datadriven::RunDataFile(GetParam(), RunCase);
  EXPECT_GT(n, 0) << GetParam() << " has no cases";
}

INSTANTIATE_TEST_SUITE_P(Testdata, InspectData,
                         ::testing::ValuesIn(datadriven::DataFiles(kDataDir)),
                         datadriven::FileParamName);

}  // namespace
}  // namespace gpushare
