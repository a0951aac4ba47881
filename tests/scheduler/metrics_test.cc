// gpushare-scheduler's /metrics (scheduler/metrics.h) and PREFIX/debug/cache (scheduler/inspect.h)
// against known cache states: exact exposition lines for every series, the histograms and the
// reason counters observing, golden cache-view JSON, 404 for an unknown node; PREFIX/inspect's
// handler on known informer contents: the document kube/inspect_view.h builds (what `gpushare
// inspect -o json` prints), per node, 404 and 503; and the filter's Event message (extender.h
// FilterFailureMessage).
#include "scheduler/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "core/reasons.h"
#include "kube/inspect_view.h"
#include "kube/memshare_pod.h"
#include "net/http_server.h"
#include "scheduler/extender.h"
#include "scheduler/inspect.h"
#include "scheduler/webhook_certs.h"
#include "tests/dashboard_series.h"
#include "tests/scheduler/fixtures.h"

namespace gpushare::scheduler {
namespace {

using namespace testing;
namespace ms = memshare;

// The lines of `text` that start with `prefix`.
std::string Lines(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) out += line + "\n";
  return out;
}

// A cache with two nodes: n1 (2 x 24 GiB A10; pod a 3 GiB confirmed on GPU 0, pod b 5 GiB
// booked by a bind, not yet confirmed, on GPU 1) and n2 (1 x 16 GiB, unhealthy).
class KnownCache : public ::testing::Test {
 protected:
  KnownCache() {
    cache_.SetSynced(true);
    cache_.UpsertNode(DecodeNodeOrDie(NodeJson("n1", Uniform(2, 24))));
    cache_.UpsertNode(DecodeNodeOrDie(NodeJson("n2", {{16, false}})));
    json a = PodJson("a", {{"main", 3}}, "team", "uid-a");
    a["spec"]["nodeName"] = "n1";
    const ms::PodRequest req = Req(a);
    auto ann = ms::BindAnnotations(req, {0}, 24, 1);
    for (const auto& [k, v] : ms::ConfirmAnnotations(req, {{"main", 0}})) ann[k] = v;
    for (const auto& [k, v] : ann) a["metadata"]["annotations"][k] = v;
    a["status"]["phase"] = "Running";
    cache_.UpsertPod(DecodePodOrDie(a));
    // b: reserved and committed as a bind does (the engine puts it beside a, or on GPU 1).
    const json b = PodJson("b", {{"main", 5}, {"sidecar", 0}}, "team", "uid-b");
    Result<Reservation> r = cache_.Reserve(DecodePodOrDie(b), Req(b), "n1", 2);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (r.ok()) {
      cache_.Commit("uid-b", r->token);
      b_gpu_ = r->demand_gpus[0];
    }
  }
  GpuCache cache_;
  int b_gpu_ = -1;
};

TEST_F(KnownCache, PerGpuGaugesAreExact) {
  ASSERT_EQ(b_gpu_, 0);  // best fit: beside a
  const std::string text = Serialize(GpuCollector(cache_, ms::MemoryUnit::kGiB).Collect());
  const std::string u0 = "GPU-1000-0000-0000-0000-000000000000", u1 = "GPU-1001-0000-0000-0000-"
                                                                      "000000000000";
  // 24 GiB + 300 MiB of framebuffer (fixtures.h); 3 + 5 GiB booked on GPU 0.
  EXPECT_EQ(
      text,
      "# HELP gpushare_scheduler_gpu_core_allocated_ratio Compute of each GPU booked for "
      "compute shares (aliyun.com/gpu-core.percentage, nvidia.com/gpucores), 1 = the whole "
      "GPU, as gpushare-scheduler's cache counts it.\n"
      "# TYPE gpushare_scheduler_gpu_core_allocated_ratio gauge\n"
      "gpushare_scheduler_gpu_core_allocated_ratio{index=\"0\",node=\"n1\",uuid=\"" +
          u0 +
          "\"} 0\n"
          "gpushare_scheduler_gpu_core_allocated_ratio{index=\"1\",node=\"n1\",uuid=\"" +
          u1 +
          "\"} 0\n"
          "gpushare_scheduler_gpu_core_allocated_ratio{index=\"0\",node=\"n2\",uuid=\"" +
          u0 +
          "\"} 0\n"
          "# HELP gpushare_scheduler_gpu_memory_allocated_bytes Memory of each GPU booked for "
          "memory-share containers as gpushare-scheduler's cache counts it (confirmed, assumed "
          "and binds in flight).\n"
          "# TYPE gpushare_scheduler_gpu_memory_allocated_bytes gauge\n"
          "gpushare_scheduler_gpu_memory_allocated_bytes{index=\"0\",node=\"n1\",uuid=\"" +
          u0 +
          "\"} 8589934592\n"
          "gpushare_scheduler_gpu_memory_allocated_bytes{index=\"1\",node=\"n1\",uuid=\"" +
          u1 +
          "\"} 0\n"
          "gpushare_scheduler_gpu_memory_allocated_bytes{index=\"0\",node=\"n2\",uuid=\"" +
          u0 +
          "\"} 0\n"
          "# HELP gpushare_scheduler_gpu_memory_bytes Memory of each GPU as its node's "
          "inventory reports it (the GPU's framebuffer).\n"
          "# TYPE gpushare_scheduler_gpu_memory_bytes gauge\n"
          "gpushare_scheduler_gpu_memory_bytes{index=\"0\",node=\"n1\",uuid=\"" +
          u0 +
          "\"} 26084376576\n"
          "gpushare_scheduler_gpu_memory_bytes{index=\"1\",node=\"n1\",uuid=\"" +
          u1 +
          "\"} 26084376576\n"
          "gpushare_scheduler_gpu_memory_bytes{index=\"0\",node=\"n2\",uuid=\"" +
          u0 + "\"} 17494441984\n");
  // MiB units count bytes per MiB.
  GpuCache mib(CacheOptions{ms::MemoryUnit::kMiB});
  mib.UpsertNode(
      DecodeNodeOrDie(NodeJson("m", Inventory(Uniform(1, 1000), 48, ms::MemoryUnit::kMiB))));
  EXPECT_NE(Serialize(GpuCollector(mib, ms::MemoryUnit::kMiB).Collect())
                .find("gpushare_scheduler_gpu_memory_bytes{index=\"0\",node=\"m\",uuid=\"" + u0 +
                      "\"} 1363148800\n"),
            std::string::npos);
}

TEST_F(KnownCache, CacheGaugesCountAssumedPods) {
  const CacheStats c = cache_.stats();
  EXPECT_EQ(c.pods, 2);
  EXPECT_EQ(c.assumed, 1);  // b; a is confirmed
  MetricsSnapshot s;
  s.cache = &c;
  const std::string text = Serialize(StatsFamilies(s));
  EXPECT_EQ(Lines(text, "gpushare_scheduler_assumed_pods"), "gpushare_scheduler_assumed_pods 1\n");
  EXPECT_EQ(Lines(text, "gpushare_scheduler_cache_pods"), "gpushare_scheduler_cache_pods 2\n");
  EXPECT_EQ(Lines(text, "gpushare_scheduler_cache_nodes"), "gpushare_scheduler_cache_nodes 2\n");
  EXPECT_EQ(Lines(text, "gpushare_scheduler_cache_usable_gpus"),
            "gpushare_scheduler_cache_usable_gpus 2\n");
}

TEST(MetricsTest, EverySeriesOfTheCountersIsExact) {
  ExtenderStats x;
  x.filter = 10;
  x.filter_errors = 1;
  x.prioritize = 9;
  x.prioritize_errors = 2;
  x.bind = 8;
  x.bind_errors = 3;
  x.bind_idempotent = 4;
  x.bad_requests = 5;
  x.bind_ns_total = 1500000000;
  CacheStats c;
  c.nodes = 3;
  c.usable_gpus = 24;
  c.pods = 7;
  c.assumed = 2;
  c.reserved = 1;
  c.unassigned = 6;
  c.picks = 27;
  c.picks_expired = 28;
  net::HttpServerStats h;
  h.connections = 11;
  h.buffered_bytes = 12;
  h.accepted = 13;
  h.refused = 14;
  h.timeouts = 15;
  h.evicted = 16;
  h.tls_handshake_errors = 17;
  h.tls_reloads = 18;
  h.tls_reload_errors = 19;
  WebhookCertStats certs;
  certs.failures = 20;
  certs.secret_writes = 21;
  certs.file_writes = 22;
  MetricsSnapshot s;
  s.extender = &x;
  s.cache = &c;
  s.http = &h;
  s.assume_expired = 23;
  s.api_requests = 29;
  s.api_connections = 30;
  s.api_throttled = 31;
  s.ready = true;
  s.webhook = MetricsSnapshot::Webhook{24, 25, 26, 27, true, &certs};
  const std::string text = Serialize(StatsFamilies(s));
  std::string samples;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind('#', 0) != 0) samples += line + "\n";
  EXPECT_EQ(samples,
            "gpushare_scheduler_api_connections_total 30\n"
            "gpushare_scheduler_api_requests_total 29\n"
            "gpushare_scheduler_api_throttled_total 31\n"
            "gpushare_scheduler_assume_expired_total 23\n"
            "gpushare_scheduler_assumed_pods 2\n"
            "gpushare_scheduler_bad_requests_total 5\n"
            "gpushare_scheduler_bind_idempotent_total 4\n"
            "gpushare_scheduler_bind_seconds_total 1.5\n"
            "gpushare_scheduler_cache_nodes 3\n"
            "gpushare_scheduler_cache_picks 27\n"
            "gpushare_scheduler_cache_pods 7\n"
            "gpushare_scheduler_cache_reserved_pods 1\n"
            "gpushare_scheduler_cache_unassigned_pods 6\n"
            "gpushare_scheduler_cache_usable_gpus 24\n"
            "gpushare_scheduler_errors_total{verb=\"filter\"} 1\n"
            "gpushare_scheduler_errors_total{verb=\"prioritize\"} 2\n"
            "gpushare_scheduler_errors_total{verb=\"bind\"} 3\n"
            "gpushare_scheduler_http_buffered_bytes 12\n"
            "gpushare_scheduler_http_connections 11\n"
            "gpushare_scheduler_http_connections_total 13\n"
            "gpushare_scheduler_http_evicted_total 16\n"
            "gpushare_scheduler_http_refused_total 14\n"
            "gpushare_scheduler_http_timeouts_total 15\n"
            "gpushare_scheduler_picks_expired_total 28\n"
            "gpushare_scheduler_ready 1\n"
            "gpushare_scheduler_requests_total{verb=\"filter\"} 10\n"
            "gpushare_scheduler_requests_total{verb=\"prioritize\"} 9\n"
            "gpushare_scheduler_requests_total{verb=\"bind\"} 8\n"
            "gpushare_scheduler_tls_handshake_errors_total 17\n"
            "gpushare_scheduler_tls_reload_errors_total 19\n"
            "gpushare_scheduler_tls_reloads_total 18\n"
            "gpushare_scheduler_webhook_cert_failures_total 20\n"
            "gpushare_scheduler_webhook_cert_file_writes_total 22\n"
            "gpushare_scheduler_webhook_cert_secret_writes_total 21\n"
            "gpushare_scheduler_webhook_requests_total{result=\"mutated\"} 24\n"
            "gpushare_scheduler_webhook_requests_total{result=\"unchanged\"} 25\n"
            "gpushare_scheduler_webhook_requests_total{result=\"invalid\"} 26\n"
            "gpushare_scheduler_webhook_requests_total{result=\"denied\"} 27\n"
            "gpushare_scheduler_webhook_serving 1\n");
  // Types: the *_total series are counters, the rest gauges.
  EXPECT_NE(text.find("# TYPE gpushare_scheduler_requests_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE gpushare_scheduler_http_connections gauge\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE gpushare_scheduler_bind_seconds_total counter\n"), std::string::npos);
  // Without a webhook, no webhook series.
  s.webhook.reset();
  EXPECT_EQ(Serialize(StatsFamilies(s)).find("webhook"), std::string::npos);
}

// Every sample's family has # HELP and # TYPE, each once, before its samples.
void ExpectHelpAndType(const std::string& text) {
  std::set<std::string> help, type;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# HELP ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(help.insert(name).second) << name;
      EXPECT_GT(line.size(), 7 + name.size() + 1) << "empty help: " << line;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      EXPECT_TRUE(type.insert(line.substr(7, line.find(' ', 7) - 7)).second) << line;
      continue;
    }
    std::string name = line.substr(0, line.find_first_of("{ "));
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string base = name.substr(0, name.size() - std::strlen(suffix));
      if (name.size() > std::strlen(suffix) && name.ends_with(suffix) && type.count(base))
        name = base;
    }
    EXPECT_TRUE(help.count(name)) << "no # HELP before " << line;
    EXPECT_TRUE(type.count(name)) << "no # TYPE before " << line;
  }
}

TEST(MetricsTest, HistogramsAndReasonCountersObserve) {
  SchedulerMetrics m;
  m.ObserveFilter(0.0002);  // 200 us
  m.ObserveFilter(3);
  m.ObservePrioritize(0.00005);
  m.ObserveBind(20);  // past the last bucket
  m.CountFilterRejections(reasons::kGpuMemoryInsufficient, 99);
  m.CountFilterRejections(reasons::kGpuMemoryInsufficient);
  m.CountBindFailure(reasons::kBindConflict);
  m.CountBindFailure("SomethingNew");  // a code without a series yet gets one
  const std::string text = Serialize(m.Collect());
  ExpectHelpAndType(text);
  EXPECT_EQ(Lines(text, "gpushare_scheduler_filter_duration_seconds"),
            "gpushare_scheduler_filter_duration_seconds_count 2\n"
            "gpushare_scheduler_filter_duration_seconds_sum 3.0002\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"0.0001\"} 0\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"0.00025\"} 1\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"0.0005\"} 1\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"0.001\"} 1\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"0.0025\"} 1\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"0.005\"} 1\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"0.01\"} 1\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"0.025\"} 1\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"0.05\"} 1\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"0.1\"} 1\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"0.25\"} 1\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"0.5\"} 1\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"1\"} 1\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"2.5\"} 1\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"5\"} 2\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"10\"} 2\n"
            "gpushare_scheduler_filter_duration_seconds_bucket{le=\"+Inf\"} 2\n");
  EXPECT_NE(text.find("gpushare_scheduler_prioritize_duration_seconds_bucket{le=\"0.0001\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpushare_scheduler_bind_duration_seconds_bucket{le=\"10\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpushare_scheduler_bind_duration_seconds_bucket{le=\"+Inf\"} 1\n"),
            std::string::npos);
  EXPECT_EQ(Lines(text, "gpushare_scheduler_filter_rejections_total"),
            "gpushare_scheduler_filter_rejections_total{reason=\"ClientCeilingReached\"} 0\n"
            "gpushare_scheduler_filter_rejections_total{reason=\"GpuExcluded\"} 0\n"
            "gpushare_scheduler_filter_rejections_total{reason=\"GpuMemoryInsufficient\"} 100\n"
            "gpushare_scheduler_filter_rejections_total{reason=\"GpuUnhealthy\"} 0\n"
            "gpushare_scheduler_filter_rejections_total{reason=\"InvalidRequest\"} 0\n"
            "gpushare_scheduler_filter_rejections_total{reason=\"NoGpuFitsContainer\"} 0\n"
            "gpushare_scheduler_filter_rejections_total{reason=\"NoSharedGpu\"} 0\n"
            "gpushare_scheduler_filter_rejections_total{reason=\"NodeHeldBack\"} 0\n"
            "gpushare_scheduler_filter_rejections_total{reason=\"NodeUnknown\"} 0\n"
            "gpushare_scheduler_filter_rejections_total{reason=\"PendingSlotConflict\"} 0\n");
  EXPECT_EQ(Lines(text, "gpushare_scheduler_bind_failures_total"),
            "gpushare_scheduler_bind_failures_total{reason=\"BindApiError\"} 0\n"
            "gpushare_scheduler_bind_failures_total{reason=\"BindConflict\"} 1\n"
            "gpushare_scheduler_bind_failures_total{reason=\"BindPodChanged\"} 0\n"
            "gpushare_scheduler_bind_failures_total{reason=\"InvalidRequest\"} 0\n"
            "gpushare_scheduler_bind_failures_total{reason=\"NoSharedGpu\"} 0\n"
            "gpushare_scheduler_bind_failures_total{reason=\"NodeUnknown\"} 0\n"
            "gpushare_scheduler_bind_failures_total{reason=\"SchedulerNotReady\"} 0\n"
            "gpushare_scheduler_bind_failures_total{reason=\"SomethingNew\"} 1\n");
}

TEST(MetricsTest, PreemptionSeriesExistFromTheStartAndCount) {
  SchedulerMetrics m;
  std::string text = Serialize(m.Collect());
  ExpectHelpAndType(text);
  EXPECT_NE(text.find("gpushare_scheduler_preemptions_total{result=\"nominated\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpushare_scheduler_preemptions_total{result=\"not_helpful\"} 0\n"),
            std::string::npos);
  EXPECT_EQ(Lines(text, "gpushare_scheduler_preemption_victims_total"),
            "gpushare_scheduler_preemption_victims_total 0\n");
  m.CountPreemption(true, 7);
  m.CountPreemption(false, 0);
  m.CountPreemption(true, 2);
  m.ObservePreempt(0.02);
  text = Serialize(m.Collect());
  EXPECT_NE(text.find("gpushare_scheduler_preemptions_total{result=\"nominated\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpushare_scheduler_preemptions_total{result=\"not_helpful\"} 1\n"),
            std::string::npos);
  EXPECT_EQ(Lines(text, "gpushare_scheduler_preemption_victims_total"),
            "gpushare_scheduler_preemption_victims_total 9\n");
  EXPECT_NE(text.find("gpushare_scheduler_preempt_duration_seconds_bucket{le=\"0.025\"} 1\n"),
            std::string::npos);
}

TEST_F(KnownCache, TheWholeExpositionHasHelpAndTypeForEverySeries) {
  SchedulerMetrics m;
  m.ObserveBind(0.01);
  std::vector<prometheus::MetricFamily> all = StatsFamilies(MetricsSnapshot{});
  for (auto& f : m.Collect()) all.push_back(std::move(f));
  for (auto& f : GpuCollector(cache_, ms::MemoryUnit::kGiB).Collect()) all.push_back(std::move(f));
  ExpectHelpAndType(Serialize(std::move(all)));
}

// Every series the chart's Grafana dashboard queries from gpushare-scheduler is one it exposes.
TEST_F(KnownCache, EveryDashboardSeriesIsExposed) {
  const std::set<std::string> wanted = gpushare::testing::DashboardSeries({"gpushare_scheduler_"});
  ASSERT_GE(wanted.size(), 4u) << "the dashboard's queries were not found";
  SchedulerMetrics m;
  std::vector<prometheus::MetricFamily> all = StatsFamilies(MetricsSnapshot{});
  for (auto& f : m.Collect()) all.push_back(std::move(f));
  for (auto& f : GpuCollector(cache_, ms::MemoryUnit::kGiB).Collect()) all.push_back(std::move(f));
  const std::set<std::string> typed = gpushare::testing::TypedFamilies(Serialize(std::move(all)));
  for (const std::string& name : wanted) EXPECT_TRUE(typed.count(name)) << name;
}

// A compute share shows as the GPU's booked compute, as a ratio of the whole GPU.
TEST_F(KnownCache, ComputeSharesShowAsTheGpusCoreAllocatedRatio) {
  json c = PodJson("c", {{"main", 2}}, "team", "uid-c");
  c["spec"]["containers"][0]["resources"]["limits"]["aliyun.com/gpu-core.percentage"] = "30";
  Result<Reservation> r = cache_.Reserve(DecodePodOrDie(c), Req(c), "n1", 3);
  ASSERT_TRUE(r.ok()) << r.status().message();
  cache_.Commit("uid-c", r->token);
  const std::string text = Serialize(GpuCollector(cache_, ms::MemoryUnit::kGiB).Collect());
  const std::string want = "gpushare_scheduler_gpu_core_allocated_ratio{index=\"" +
                           std::to_string(r->demand_gpus[0]) + "\",node=\"n1\"";
  const size_t at = text.find(want);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_EQ(text.substr(text.find("} ", at) + 2, 4), "0.3\n") << text;
}

TEST_F(KnownCache, CacheViewIsTheCachesViewAsJson) {
  const json got = json::parse(EncodeCacheView(cache_.Inspect(), ms::MemoryUnit::kGiB));
  const std::string u0 = "GPU-1000-0000-0000-0000-000000000000";
  const std::string u1 = "GPU-1001-0000-0000-0000-000000000000";
  const json a = {{"namespace", "team"},
                  {"name", "a"},
                  {"uid", "uid-a"},
                  {"units", 3},
                  {"bytes", 3221225472},
                  {"state", "confirmed"},
                  {"containers", {{"main", 3}}}};
  const json b = {{"namespace", "team"},
                  {"name", "b"},
                  {"uid", "uid-b"},
                  {"units", 5},
                  {"bytes", 5368709120},
                  {"state", "assumed"},
                  {"containers", {{"main", 5}}}};
  json b_pending = b;
  b_pending["gpus"] = {{"main", 0}};
  auto gpu = [](int index, const std::string& uuid, int64_t units, bool healthy, int64_t used,
                int clients, json pods) {
    return json{
        {"index", index},
        {"uuid", uuid},
        {"model", "NVIDIA A10"},
        {"health", healthy ? "Healthy" : "Unhealthy"},
        {"mode", "memory"},
        {"usable", healthy},
        {"memory",
         {{"totalBytes", (units * 1024 + 300) * 1048576}, {"allocatedBytes", used * 1073741824}}},
        {"units", {{"total", units}, {"allocated", used}}},
        {"clients", clients},
        {"computeAllocatedPercent", 0},
        {"pods", std::move(pods)}};
  };
  const json n1 = {
      {"name", "n1"},
      {"usable", true},
      {"maxClientsPerGpu", 48},
      {"gpus", {gpu(0, u0, 24, true, 8, 2, {a, b}), gpu(1, u1, 24, true, 0, 0, json::array())}},
      {"pendingPods", {b_pending}}};
  const json n2 = {{"name", "n2"},
                   {"usable", false},
                   {"reason", "GpuUnhealthy"},
                   {"problem", "no GPU serves memory shares (GPU 0 unhealthy)"},
                   {"maxClientsPerGpu", 48},
                   {"gpus", {gpu(0, u0, 16, false, 0, 0, json::array())}},
                   {"pendingPods", json::array()}};
  const json want = {{"unit", "GiB"},
                     {"nodes", {n1, n2}},
                     {"totals",
                      {{"nodes", 2},
                       {"gpus", 3},
                       {"memory",
                        {{"totalBytes", (2 * (24 * 1024 + 300) + 16 * 1024 + 300) * 1048576LL},
                         {"allocatedBytes", 8 * 1073741824LL}}},
                       {"units", {{"total", 64}, {"allocated", 8}}},
                       {"pendingPods", 1}}}};
  EXPECT_EQ(got, want) << got.dump(2);
  // One node, and the HTTP handler's answers.
  EXPECT_EQ(json::parse(ServeCacheView(cache_, ms::MemoryUnit::kGiB, "/n1").body), n1);
  EXPECT_EQ(json::parse(ServeCacheView(cache_, ms::MemoryUnit::kGiB, "").body), want);
  const HttpReply missing = ServeCacheView(cache_, ms::MemoryUnit::kGiB, "/ghost");
  EXPECT_EQ(missing.code, 404);
  EXPECT_EQ(json::parse(missing.body)["Error"],
            "node ghost is not in gpushare-scheduler's cache (not seen by its node informer)");
  EXPECT_EQ(ServeCacheView(cache_, ms::MemoryUnit::kGiB, "/n1/gpus").code, 404);
}

// ---- PREFIX/inspect's handler ------------------------------------------------------------------

// What the informers hold: n1 (2 x 24 GiB, pod a 3 GiB confirmed on GPU 0, pod b 5 GiB assumed on
// GPU 1), cpu (no GPU), a pod pending with kube-scheduler's reason, and one on no node asking for
// no GPU.
class KnownInformers : public ::testing::Test {
 protected:
  KnownInformers() {
    Add(DecodeNodeOrDie(NodeJson("n1", Uniform(2, 24))));
    Add(DecodeNodeOrDie(
        {{"metadata", {{"name", "cpu"}}}, {"status", {{"capacity", {{"cpu", "8"}}}}}}));
    Add(Bound("a", "n1", 3, 0, true));
    Add(Bound("b", "n1", 5, 1, false));
    // Bound, on no GPU yet (the node's unplaced pods: listed in the order the pods come).
    for (const char* name : {"q1", "q2"}) {
      json q = PodJson(name, {{"main", 2}}, "team", std::string("uid-") + name);
      q["spec"]["nodeName"] = "n1";
      Add(DecodePodOrDie(q));
    }
    json pending = PodJson("big", {{"main", 30}}, "team", "uid-big");
    pending["status"]["conditions"] = {{{"type", "PodScheduled"},
                                        {"status", "False"},
                                        {"reason", "Unschedulable"},
                                        {"message", "0/2 nodes are available"}}};
    Add(DecodePodOrDie(pending));
    Add(DecodePodOrDie(PodJson("web", {{"main", 0}}, "team", "uid-web")));
    source_.nodes = [this] { return nodes_; };
    source_.pods = [this] { return pods_; };
    source_.synced = [this] { return synced_; };
  }
  // A pod bound to `node` with the scheduler's annotations: `units` GiB on GPU `gpu`, confirmed
  // by gpushare-node or only assumed.
  static kube::Pod Bound(const std::string& name, const std::string& node, int64_t units, int gpu,
                         bool confirmed) {
    json p = PodJson(name, {{"main", units}}, "team", "uid-" + name);
    p["spec"]["nodeName"] = node;
    p["status"]["phase"] = confirmed ? "Running" : "Pending";
    const ms::PodRequest req = Req(p);
    auto ann = ms::BindAnnotations(req, {gpu}, 24, 1);
    if (confirmed)
      for (const auto& [k, v] : ms::ConfirmAnnotations(req, {{"main", gpu}})) ann[k] = v;
    for (const auto& [k, v] : ann) p["metadata"]["annotations"][k] = v;
    return DecodePodOrDie(p);
  }
  void Add(kube::Node n) { nodes_.push_back(std::make_shared<const kube::Node>(std::move(n))); }
  void Add(kube::Pod p) { pods_.push_back(std::make_shared<const kube::Pod>(std::move(p))); }
  // What `gpushare inspect [NODE] -o json` prints for the same objects, compact.
  std::string Cli(const std::string& node = "") const {
    kube::inspect::Input in;
    for (const auto& n : nodes_) in.nodes.push_back(*n);
    for (const auto& p : pods_) in.pods.push_back(*p);
    kube::inspect::Filter f;
    f.node = node;
    return kube::inspect::ToJson(kube::inspect::Build(in, f)).dump();
  }

  std::vector<std::shared_ptr<const kube::Node>> nodes_;
  std::vector<std::shared_ptr<const kube::Pod>> pods_;
  bool synced_ = true;
  InspectSource source_;
};

TEST_F(KnownInformers, InspectIsTheDocumentTheCliPrints) {
  const HttpReply all = ServeInspect(source_, "");
  EXPECT_EQ(all.code, 200);
  EXPECT_EQ(all.body, Cli());
  // The parts this fixture is about, so that an empty document would not pass.
  const json view = json::parse(all.body);
  EXPECT_EQ(view["kind"], "Inspect");
  ASSERT_EQ(view["nodes"].size(), 1u) << view.dump(2);  // cpu has nothing GPU
  EXPECT_EQ(view["nodes"][0]["name"], "n1");
  EXPECT_EQ(view["nodes"][0]["gpus"][0]["pods"][0]["source"], "confirmed");
  EXPECT_EQ(view["nodes"][0]["gpus"][1]["pods"][0]["source"], "assumed");
  ASSERT_EQ(view["pending"].size(), 1u);
  EXPECT_EQ(view["pending"][0]["name"], "big");
  EXPECT_EQ(view["pending"][0]["reason"], "Unschedulable");  // the condition: no Events watched
  EXPECT_EQ(ServeInspect(source_, "/").body, all.body);
}

TEST_F(KnownInformers, InspectDoesNotDependOnTheInformersOrder) {
  const std::string before = ServeInspect(source_, "").body;
  ASSERT_EQ(json::parse(before)["nodes"][0]["unplaced"].size(), 2u) << before;
  std::reverse(nodes_.begin(), nodes_.end());
  std::reverse(pods_.begin(), pods_.end());
  EXPECT_EQ(ServeInspect(source_, "").body, before);
}

TEST_F(KnownInformers, InspectNodeIsTheViewOfThatNode) {
  const HttpReply n1 = ServeInspect(source_, "/n1");
  EXPECT_EQ(n1.code, 200);
  EXPECT_EQ(n1.body, Cli("n1"));
  const json view = json::parse(n1.body);
  EXPECT_EQ(view["nodes"].size(), 1u);
  EXPECT_EQ(view["pending"], json::array());  // pending pods are on no node
  // A node the API server has, with nothing GPU: the (empty) view, as the CLI prints it.
  const HttpReply cpu = ServeInspect(source_, "/cpu");
  EXPECT_EQ(cpu.code, 200);
  EXPECT_EQ(cpu.body, Cli("cpu"));
  EXPECT_EQ(json::parse(cpu.body)["nodes"], json::array());
}

TEST_F(KnownInformers, InspectRefusesAnUnknownNodeADeeperPathAndAnUnsyncedCache) {
  const HttpReply ghost = ServeInspect(source_, "/ghost");
  EXPECT_EQ(ghost.code, 404);
  EXPECT_EQ(json::parse(ghost.body)["Error"],
            "node ghost is not in gpushare-scheduler's node informer (the API server has no such "
            "node)");
  EXPECT_EQ(ServeInspect(source_, "/n1/gpus").code, 404);
  synced_ = false;
  const HttpReply early = ServeInspect(source_, "");
  EXPECT_EQ(early.code, 503);
  EXPECT_NE(json::parse(early.body)["Error"].get<std::string>().find("not listed"),
            std::string::npos);
  EXPECT_EQ(ServeInspect(source_, "/ghost").code, 503);  // not a 404: it may not be listed yet
}

TEST(FilterFailureMessageTest, DominantReasonAndBoundedList) {
  const std::string full = "no GPU has 5 GiB free for container main: the most free is GPU 2";
  const std::string gone = "node is not in gpushare-scheduler's cache";
  std::vector<RefusedNode> nodes = {{"node-1", reasons::kNodeUnknown, &gone},
                                    {"node-2", reasons::kGpuMemoryInsufficient, &full},
                                    {"node-3", reasons::kGpuMemoryInsufficient, &full},
                                    {"node-4", reasons::kGpuMemoryInsufficient, &full},
                                    {"node-5", reasons::kGpuMemoryInsufficient, &full}};
  auto [code, msg] = FilterFailureMessage(5, nodes);
  EXPECT_EQ(code, reasons::kGpuMemoryInsufficient);
  EXPECT_EQ(msg,
            "0/5 nodes can take the pod (4 GpuMemoryInsufficient, 1 NodeUnknown): node-2: "
            "GpuMemoryInsufficient: " +
                full + "; node-3: GpuMemoryInsufficient: " + full +
                "; node-4: GpuMemoryInsufficient: " + full + "; and 2 more");
  // Ties go to what the pod lacks before what the node is.
  auto [tie, _] = FilterFailureMessage(2, {nodes[0], nodes[1]});
  EXPECT_EQ(tie, reasons::kGpuMemoryInsufficient);
  // Long reasons keep the message bounded.
  const std::string huge(5000, 'x');
  std::vector<RefusedNode> many;
  for (int i = 0; i < 100; ++i) many.push_back({"n", reasons::kClientCeilingReached, &huge});
  auto [c2, m2] = FilterFailureMessage(100, many);
  EXPECT_EQ(c2, reasons::kClientCeilingReached);
  EXPECT_LE(m2.size(), kMaxEventMessage);
  EXPECT_NE(m2.find("more"), std::string::npos) << m2;
}

}  // namespace
}  // namespace gpushare::scheduler
