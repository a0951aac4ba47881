// The extender wire codec: capitalised keys and nulls out, case-insensitive keys in, hostile
// and truncated bodies refused with a reason.
#include "scheduler/wire.h"

#include <gtest/gtest.h>

namespace gpushare::scheduler {
namespace {

using json = nlohmann::json;

const char* kCacheModeRequest =
    R"({"Pod":{"metadata":{"name":"p","namespace":"ml","uid":"u1"},"spec":{"containers":[{"name":"main"}]}},)"
    R"("Nodes":null,"NodeNames":["a","b"]})";

Result<ExtenderArgs> Args(std::string_view body) {
  return ParseExtenderArgs(body);
}

// Found by fuzz/fuzz_extender_json: nlohmann's lexer reads a NUL byte as the end of the input,
// so the fast path accepted a value cut short by one while the SAX path refused the body, and
// ParseBody accepted anything after a NUL that followed a whole object.
TEST(Wire, ANulByteAnywhereIsRefusedByEveryPath) {
  using namespace std::string_literals;
  const std::string args = "{\"Pod\":{},\"Other\":66\0\0(\0}"s;
  for (bool general : {false, true}) {
    auto r = general ? ParseExtenderArgsGeneral(args) : ParseExtenderArgs(args);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), "malformed JSON: NUL byte at offset 20");
  }
  const std::string bind = "{\"PodName\":\"p\",\"Node\":\"n\"}\0junk"s;
  auto b = ParseBody(bind);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "malformed JSON: NUL byte at offset 26");
}

TEST(Wire, CacheModeRequest) {
  Result<ExtenderArgs> a = Args(kCacheModeRequest);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->names_mode());
  EXPECT_FALSE(a->nodes.has_value());
  EXPECT_EQ(a->CandidateNames(), (std::vector<std::string_view>{"a", "b"}));
  EXPECT_EQ(a->pod["metadata"]["name"], "p");
}

TEST(Wire, FullNodeListRequest) {
  Result<ExtenderArgs> a = Args(
      R"({"Pod":{"metadata":{"name":"p"}},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a"},"status":{}},)"
      R"({"metadata":{"name":"b"}}]},"NodeNames":null})");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_FALSE(a->names_mode());
  EXPECT_EQ(a->CandidateNames(), (std::vector<std::string_view>{"a", "b"}));
  EXPECT_TRUE((*a->nodes)[0].contains("status"));
}

TEST(Wire, KeysAreCaseInsensitiveLikeGo) {
  for (const char* body : {R"({"pod":{"metadata":{}},"nodenames":["x"],"nodes":null})",
                           R"({"POD":{"metadata":{}},"NODENAMES":["x"]})",
                           R"({"pOd":{},"NodeNameſ":["x"]})" /* U+017F folds to s */}) {
    Result<ExtenderArgs> a = Args(body);
    ASSERT_TRUE(a.ok()) << body << ": " << a.status().ToString();
    EXPECT_EQ(a->CandidateNames(), (std::vector<std::string_view>{"x"})) << body;
  }
  Result<ExtenderArgs> dup = Args(R"({"Pod":{},"pod":{},"NodeNames":[]})");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("appears twice"), std::string::npos);
}

TEST(Wire, NullsAndAbsentFields) {
  Result<ExtenderArgs> both = Args(R"({"Pod":{},"Nodes":null,"NodeNames":null})");
  ASSERT_TRUE(both.ok());
  EXPECT_TRUE(both->names_mode());
  EXPECT_TRUE(both->CandidateNames().empty());
  Result<ExtenderArgs> items_null = Args(R"({"Pod":{},"Nodes":{"items":null}})");
  ASSERT_TRUE(items_null.ok());
  EXPECT_FALSE(items_null->names_mode());
  EXPECT_TRUE(items_null->CandidateNames().empty());
}

TEST(Wire, RefusesWrongTypesWithTheField) {
  struct Case {
    const char* body;
    const char* want;
  } cases[] = {
      {R"({"Nodes":null,"NodeNames":[]})", "Pod: missing"},
      {R"({"Pod":null,"NodeNames":[]})", "Pod: missing or null"},
      {R"({"Pod":[],"NodeNames":[]})", "Pod: must be an object"},
      {R"({"Pod":{},"NodeNames":"a"})", "NodeNames: must be an array"},
      {R"({"Pod":{},"NodeNames":["a",3]})", "NodeNames[1]: must be a string"},
      {R"({"Pod":{},"Nodes":[]})", "Nodes: must be a NodeList"},
      {R"({"Pod":{},"Nodes":{"items":{}}})", "Nodes.items: must be an array"},
      {R"({"Pod":{},"Nodes":{"items":[{"metadata":{}}]}})", "Nodes.items[0].metadata.name"},
      {R"({"Pod":{},"Nodes":{"items":[7]}})", "Nodes.items[0]: must be a Node"},
      {R"([1,2])", "request body: must be a JSON object"},
      {R"("x")", "request body: must be a JSON object"},
      {"", "empty body"},
      {"{", "malformed JSON"},
      {"{\"Pod\":{}} trailing", "malformed JSON"},
      {"{\"Pod\":\"\xff\xfe\"}", "malformed JSON"},
  };
  for (const Case& c : cases) {
    Result<ExtenderArgs> a = Args(c.body);
    ASSERT_FALSE(a.ok()) << c.body;
    EXPECT_NE(a.status().message().find(c.want), std::string::npos)
        << c.body << " -> " << a.status().message();
  }
}

TEST(Wire, HostileNestingIsRefusedBeforeParsing) {
  std::string deep(200000, '[');
  Result<json> j = ParseBody(deep);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("nesting deeper than 64"), std::string::npos);
  const std::string deep_pod = "{\"Pod\":" + std::string(100000, '[');
  Result<ExtenderArgs> a = Args(deep_pod);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("nesting deeper than 64"), std::string::npos)
      << a.status().message();
  // Unknown keys are skipped, whatever they hold (within the depth limit).
  a = Args(
      R"({"Extra":{"a":[1,2,{"b":null}],"NodeNames":"not this one"},"Pod":{},"NodeNames":["n"],"more":[["x"]]})");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->CandidateNames(), (std::vector<std::string_view>{"n"}));
  // Brackets inside strings do not count; escaped quotes do not end a string.
  std::string s =
      R"({"Pod":{"metadata":{"name":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"[[["}}})";
  EXPECT_TRUE(ParseBody(s).ok()) << ParseBody(s).status().ToString();
  std::string ok_depth;
  for (int i = 0; i < 63; ++i) ok_depth += "{\"a\":";
  ok_depth += "1" + std::string(63, '}');
  EXPECT_TRUE(ParseBody(ok_depth).ok());
}

TEST(Wire, EveryTruncationFailsCleanly) {
  const std::string body = kCacheModeRequest;
  for (size_t n = 0; n < body.size(); ++n) EXPECT_FALSE(Args(body.substr(0, n)).ok()) << n;
}

// The fast path (plain ASCII requests) and the general SAX path must agree on every body: the
// same result for what decodes, the same error for what does not.
void ExpectSamePaths(const std::string& body) {
  Result<ExtenderArgs> fast = ParseExtenderArgs(body);
  Result<ExtenderArgs> general = ParseExtenderArgsGeneral(body);
  ASSERT_EQ(fast.ok(), general.ok()) << body << "\nfast: " << fast.status().ToString()
                                     << "\ngeneral: " << general.status().ToString();
  if (!fast.ok()) {
    EXPECT_EQ(fast.status().message(), general.status().message()) << body;
    return;
  }
  EXPECT_EQ(fast->pod, general->pod) << body;
  EXPECT_EQ(fast->node_names, general->node_names) << body;
  EXPECT_EQ(fast->nodes.has_value(), general->nodes.has_value()) << body;
  if (fast->nodes && general->nodes) {
    EXPECT_EQ(*fast->nodes, *general->nodes) << body;
  }
}

TEST(Wire, FastAndGeneralPathsAgreeOnEveryMutation) {
  const std::vector<std::string> seeds = {
      kCacheModeRequest,
      R"({"Pod":{"metadata":{"name":"p"}},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a"}}]},"NodeNames":null})",
      R"( { "pod" : { "a" : [ 1 , -2.5e3 , true , null , "s\"q" ] } , "X" : [ [ ] ] , "nodenames" : [ "n-1" , "n.2" ] } )",
      R"({"Pod":{},"NodeNames":[],"Nodes":null,"Extra":"\u00e9"})",
  };
  const char subs[] = {'{', '}', '[', ']', '"', ',', ':', '\\', 'x', '0', ' ', '\x01', '\xc3', 'n'};
  size_t bodies = 0;
  for (const std::string& seed : seeds) {
    ExpectSamePaths(seed);
    for (size_t i = 0; i < seed.size(); ++i) {
      std::string del = seed;
      del.erase(i, 1);
      ExpectSamePaths(del);
      ++bodies;
      for (char c : subs) {
        std::string m = seed;
        m[i] = c;
        ExpectSamePaths(m);
        std::string ins = seed;
        ins.insert(i, 1, c);
        ExpectSamePaths(ins);
        bodies += 2;
      }
    }
  }
  EXPECT_GT(bodies, 5000u);
  // Depth: the limit holds on the fast path too.
  std::string deep = "{\"Pod\":{},\"X\":";
  deep += std::string(64, '[') + std::string(64, ']') + "}";  // the body's object is level 1
  ExpectSamePaths(deep);
  EXPECT_FALSE(ParseExtenderArgs(deep).ok());
  std::string fits = "{\"Pod\":{},\"X\":" + std::string(63, '[') + std::string(63, ']') + "}";
  ExpectSamePaths(fits);
  EXPECT_TRUE(ParseExtenderArgs(fits).ok());
}

TEST(Wire, FilterResultIsWhatGoWouldWrite) {
  FilterResult r;
  r.node_names = {"a", "c"};
  r.failed = {{"b", "no GPU has 3 GiB free"}};
  EXPECT_EQ(EncodeFilterResult(r),
            R"({"Nodes":null,"NodeNames":["a","c"],"FailedNodes":{"b":"no GPU has 3 GiB free"},)"
            R"("FailedAndUnresolvableNodes":{},"Error":""})");
  FilterResult n;
  n.names_mode = false;
  n.nodes = {json{{"metadata", {{"name", "a"}}}}};
  n.unresolvable = {{"z", "why"}};
  EXPECT_EQ(
      EncodeFilterResult(n),
      R"({"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a"}}]},"NodeNames":null,"FailedNodes":{},)"
      R"("FailedAndUnresolvableNodes":{"z":"why"},"Error":""})");
  FilterResult e;
  e.error = "cache not \"synced\"";
  EXPECT_EQ(
      EncodeFilterResult(e),
      R"({"Nodes":null,"NodeNames":null,"FailedNodes":null,"FailedAndUnresolvableNodes":null,"Error":"cache not \"synced\""})");
  FilterResult empty;
  EXPECT_EQ(json::parse(EncodeFilterResult(empty))["NodeNames"],
            json::array());  // [] not null: nothing passed
}

TEST(Wire, HostPrioritiesAndBinding) {
  EXPECT_EQ(EncodeHostPriorities({{"a", 7}, {"b", 10}}),
            R"([{"Host":"a","Score":7},{"Host":"b","Score":10}])");
  EXPECT_EQ(EncodeHostPriorities({}), "[]");
  EXPECT_EQ(EncodeBindingResult(""), R"({"Error":""})");
  EXPECT_EQ(EncodeError("x"), R"({"Error":"x"})");
  Result<json> j = ParseBody(R"({"podname":"p","PODNAMESPACE":"ml","PodUID":"u","node":"n"})");
  ASSERT_TRUE(j.ok());
  Result<BindingArgs> b = DecodeBindingArgs(*j);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->pod_name, "p");
  EXPECT_EQ(b->pod_namespace, "ml");
  EXPECT_EQ(b->pod_uid, "u");
  EXPECT_EQ(b->node, "n");
  for (const char* bad : {R"({"PodName":"p","PodNamespace":"ml","Node":null})",
                          R"({"PodName":1,"PodNamespace":"ml","Node":"n"})",
                          R"({"PodNamespace":"ml","Node":"n"})", R"({"PodName":"p","Node":"n"})"}) {
    Result<json> bj = ParseBody(bad);
    ASSERT_TRUE(bj.ok());
    EXPECT_FALSE(DecodeBindingArgs(*bj).ok()) << bad;
  }
  // No UID is allowed (the bind then trusts the name).
  Result<json> nouid = ParseBody(R"({"PodName":"p","PodNamespace":"ml","PodUID":null,"Node":"n"})");
  EXPECT_TRUE(DecodeBindingArgs(*nouid).ok());
}

}  // namespace
}  // namespace gpushare::scheduler
