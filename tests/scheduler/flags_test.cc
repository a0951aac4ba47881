// gpushare-scheduler's flags (scheduler/flags.h): the defaults, what good values become, and for
// every checked flag a bad value whose message names the flag and what would be accepted. The
// binary's exit status 2 for these is checked by integration_test (SchedulerFlags.*).
#include "scheduler/flags.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace gpushare::scheduler {
namespace {

using std::chrono::milliseconds;

// What gpushare-scheduler's main does with `args`.
Result<ServiceOptions> ParseSchedulerFlags(const std::vector<std::string>& args) {
  CLI::App app;
  SchedulerFlags flags;
  AddSchedulerFlags(app, flags);
  return scheduler::ParseSchedulerFlags(app, flags, args);
}

ServiceOptions Parsed(const std::vector<std::string>& args) {
  Result<ServiceOptions> r = ParseSchedulerFlags(args);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : ServiceOptions{};
}

// The message of the problem with `args` ("" when they pass).
std::string Problem(const std::vector<std::string>& args) {
  Result<ServiceOptions> r = ParseSchedulerFlags(args);
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(SchedulerFlagsParse, Defaults) {
  const ServiceOptions o = Parsed({});
  EXPECT_EQ(o.http.host, "127.0.0.1");
  EXPECT_EQ(o.http.port, 12345);
  EXPECT_EQ(o.url_prefix, "/gpushare-scheduler");
  EXPECT_EQ(o.health_port, -1);
  EXPECT_EQ(o.unit, memshare::MemoryUnit::kGiB);
  EXPECT_EQ(o.resource_name, "aliyun.com/gpu-mem");
  EXPECT_EQ(o.policy, "default");
  EXPECT_EQ(o.assume_timeout, milliseconds(5 * 60 * 1000));
  EXPECT_EQ(o.expiry_interval, milliseconds(10 * 1000));
  EXPECT_EQ(o.restart_hold, milliseconds(30 * 1000));
  EXPECT_EQ(o.http.max_body_bytes, 8388608u);
  EXPECT_EQ(o.http.threads, 16);
  EXPECT_EQ(o.http.max_connections, 0);
  EXPECT_EQ(o.http.header_timeout, milliseconds(10 * 1000));
  EXPECT_EQ(o.http.read_timeout, milliseconds(30 * 1000));
  EXPECT_EQ(o.http.idle_timeout, milliseconds(60 * 1000));
  EXPECT_EQ(o.kube_qps, 500);
  EXPECT_EQ(o.kube_burst, 1000);
  EXPECT_EQ(o.webhook_port, -1);
  EXPECT_FALSE(o.webhook_certs.has_value());
}

TEST(SchedulerFlagsParse, GoodValues) {
  const ServiceOptions o = Parsed({"--listen",
                                   "[::1]:0",
                                   "--health-listen",
                                   ":8080",
                                   "--memory-unit",
                                   "MiB",
                                   "--assume-timeout",
                                   "1h30m",
                                   "--restart-hold",
                                   "0s",
                                   "--preemption-budgets",
                                   "best-effort",
                                   "--nomination-timeout",
                                   "2m",
                                   "--max-body-bytes",
                                   "1024",
                                   "--http-threads",
                                   "2",
                                   "--http-max-connections",
                                   "16",
                                   "--http-idle-timeout",
                                   "24h",
                                   "--kube-api-qps",
                                   "0.5",
                                   "--kube-api-burst",
                                   "1",
                                   "--policy",
                                   "bestfit",
                                   "--resource-name",
                                   "example.com/mem"});
  EXPECT_EQ(o.http.host, "::1");
  EXPECT_EQ(o.http.port, 0);
  EXPECT_EQ(o.health_host, "0.0.0.0");
  EXPECT_EQ(o.health_port, 8080);
  EXPECT_EQ(o.unit, memshare::MemoryUnit::kMiB);
  EXPECT_EQ(o.assume_timeout, milliseconds(90 * 60 * 1000));
  EXPECT_EQ(o.restart_hold, milliseconds(0));
  EXPECT_EQ(o.preemption_budgets, placement::BudgetMode::kBestEffort);
  EXPECT_EQ(o.nomination_timeout, milliseconds(120000));
  EXPECT_EQ(o.http.max_body_bytes, 1024u);
  EXPECT_EQ(o.http.threads, 2);
  EXPECT_EQ(o.http.max_connections, 16);
  EXPECT_EQ(o.http.idle_timeout, milliseconds(24 * 3600 * 1000));
  EXPECT_EQ(o.kube_qps, 0.5);
  EXPECT_EQ(o.kube_burst, 1);
  EXPECT_EQ(o.policy, "bestfit");
  EXPECT_EQ(o.resource_name, "example.com/mem");
}

TEST(SchedulerFlagsParse, WebhookWithManagedCertificate) {
  const ServiceOptions o = Parsed(
      {"--webhook-listen", ":9443", "--webhook-cert-dir", "/certs", "--webhook-secret",
       "gpushare/webhook-tls", "--webhook-configuration", "gpushare-webhook", "--webhook-service",
       "gpushare-webhook.gpushare", "--webhook-cert-check-interval", "10m"});
  EXPECT_EQ(o.webhook_host, "0.0.0.0");
  EXPECT_EQ(o.webhook_port, 9443);
  ASSERT_TRUE(o.webhook_certs.has_value());
  EXPECT_EQ(o.webhook_certs->cert_dir, "/certs");
  EXPECT_EQ(o.webhook_certs->secret_namespace, "gpushare");
  EXPECT_EQ(o.webhook_certs->secret_name, "webhook-tls");
  EXPECT_EQ(o.webhook_certs->service_name, "gpushare-webhook");
  EXPECT_EQ(o.webhook_certs->service_namespace, "gpushare");
  EXPECT_EQ(o.webhook_certs->configuration, "gpushare-webhook");
  EXPECT_EQ(o.webhook_certs->check_interval, milliseconds(10 * 60 * 1000));
}

TEST(SchedulerFlagsParse, WebhookWithCertificateFiles) {
  const ServiceOptions o = Parsed({"--webhook-listen", "127.0.0.1:9443", "--webhook-tls-cert-file",
                                   "/t/tls.crt", "--webhook-tls-private-key-file", "/t/tls.key"});
  EXPECT_EQ(o.webhook_port, 9443);
  EXPECT_EQ(o.webhook_tls.cert_file, "/t/tls.crt");
  EXPECT_FALSE(o.webhook_certs.has_value());
}

// Each checked flag: a bad value and the whole message (the flag first).
TEST(SchedulerFlagsParse, EachFlagsMessage) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--listen", "nowhere"}, "--listen: want ADDR:PORT, got \"nowhere\""},
      {{"--listen", "127.0.0.1:99999"}, "--listen: want ADDR:PORT, got \"127.0.0.1:99999\""},
      {{"--listen", "127.0.0.1:"}, "--listen: want ADDR:PORT, got \"127.0.0.1:\""},
      {{"--health-listen", "x:y"}, "--health-listen: want ADDR:PORT, got \"x:y\""},
      {{"--memory-unit", "GB"}, "--memory-unit: must be GiB or MiB, got \"GB\""},
      {{"--assume-timeout", "soon"},
       "--assume-timeout: want a duration like 10s or 5m, got \"soon\""},
      {{"--assume-timeout", "0"},
       "--assume-timeout: must be a positive duration up to 168h, got 0"},
      {{"--expiry-interval", "1000h"},
       "--expiry-interval: must be a positive duration up to 24h, got 1000h"},
      {{"--restart-hold", "2h"}, "--restart-hold: must be 0s (no hold)..1h, got 2h"},
      {{"--preemption-budgets", "ignore"},
       "--preemption-budgets: must be respect or best-effort, got \"ignore\""},
      {{"--nomination-timeout", "0s"},
       "--nomination-timeout: must be a positive duration up to 1h, got 0s"},
      {{"--resource-name", "gpu-mem"},
       "--resource-name: \"gpu-mem\" is not an extended resource name"},
      {{"--max-body-bytes", "1e6"},
       "--max-body-bytes: want a whole number 1024..1073741824, got \"1e6\""},
      {{"--max-body-bytes", "-5"}, "--max-body-bytes: must be 1024..1073741824, got -5"},
      {{"--max-body-bytes", "18446744073709551611"},
       "--max-body-bytes: must be 1024..1073741824, got 18446744073709551611"},
      {{"--http-threads", "1"}, "--http-threads: must be 2..1024, got 1"},
      {{"--http-threads", "--"}, "--http-threads: want a whole number 2..1024, got \"--\""},
      {{"--http-max-connections", "8"},
       "--http-max-connections: must be 0 (from RLIMIT_NOFILE) or 16..1048576, got 8"},
      {{"--http-read-header-timeout", "0"}, "--http-read-header-timeout: must be 100ms..1h, got 0"},
      {{"--http-read-timeout", "2h"}, "--http-read-timeout: must be 100ms..1h, got 2h"},
      {{"--http-idle-timeout", "-1s"},
       "--http-idle-timeout: want a duration like 10s or 5m, got \"-1s\""},
      {{"--kube-api-qps", "nan"},
       "--kube-api-qps: must be a number > 0 and <= 100000, got \"nan\""},
      {{"--kube-api-qps", "0"}, "--kube-api-qps: must be a number > 0 and <= 100000, got \"0\""},
      {{"--kube-api-burst", "0"}, "--kube-api-burst: must be 1..100000, got 0"},
      {{"--policy", "fdg"}, "--policy: unknown policy \"fdg\""},
      {{"--tls-cert-file", "/x.crt"}, "--tls-cert-file: given without --tls-private-key-file"},
      {{"--webhook-secret", "a/b", "--webhook-port-file", "/p"},
       "--webhook-secret and --webhook-port-file: only with --webhook-listen"},
      {{"--webhook-listen", "nowhere"}, "--webhook-listen: want ADDR:PORT, got \"nowhere\""},
      {{"--webhook-listen", ":9443"},
       "--webhook-listen: the webhook's certificate comes either from files"},
      {{"--webhook-listen", ":9443", "--webhook-scheduler-name", "Bad_Name"},
       "--webhook-scheduler-name: \"Bad_Name\" is not a valid scheduler name (DNS-1123 subdomain)"},
      {{"--webhook-listen", ":9443", "--webhook-tls-cert-file", "/c"},
       "--webhook-tls-cert-file: needs --webhook-tls-cert-file and --webhook-tls-private-key-file "
       "together"},
      {{"--webhook-listen", ":9443", "--webhook-tls-cert-file", "/c", "--webhook-cert-dir", "/d"},
       "--webhook-tls-cert-file with --webhook-cert-dir: choose one"},
      {{"--webhook-listen", ":9443", "--webhook-tls-cert-file", "/c",
        "--webhook-tls-private-key-file", "/k", "--webhook-cert-check-interval", "1h"},
       "--webhook-cert-check-interval: only with a certificate managed by gpushare"},
      {{"--webhook-listen", ":9443", "--webhook-cert-dir", "/d"},
       "--webhook-cert-dir: a certificate managed by gpushare also needs --webhook-secret, "
       "--webhook-configuration "
       "and --webhook-service"},
      {{"--webhook-listen", ":9443", "--webhook-cert-dir", "/d", "--webhook-secret", "nons",
        "--webhook-configuration", "c", "--webhook-service", "s.ns"},
       "--webhook-secret: want NAMESPACE/NAME, got \"nons\""},
      {{"--webhook-listen", ":9443", "--webhook-cert-dir", "/d", "--webhook-secret", "ns/s",
        "--webhook-configuration", "c", "--webhook-service", "s"},
       "--webhook-service: want NAME.NAMESPACE (the Service the API server calls), got \"s\""},
      {{"--webhook-listen", ":9443", "--webhook-cert-dir", "/d", "--webhook-secret", "ns/s",
        "--webhook-configuration", "C!", "--webhook-service", "s.ns"},
       "--webhook-configuration: \"C!\" is not a valid object name"},
      {{"--webhook-listen", ":9443", "--webhook-cert-dir", "", "--webhook-secret", "ns/s",
        "--webhook-configuration", "c", "--webhook-service", "s.ns"},
       "--webhook-cert-dir: empty"},
      {{"--webhook-listen", ":9443", "--webhook-cert-dir", "/d", "--webhook-secret", "ns/s",
        "--webhook-configuration", "c", "--webhook-service", "s.ns",
        "--webhook-cert-check-interval", "8d"},
       "--webhook-cert-check-interval: want a duration like 10s or 5m, got \"8d\""},
  };
  for (const Case& c : cases) {
    const std::string got = Problem(c.args);
    EXPECT_EQ(got.rfind(c.message, 0), 0u)
        << c.args[0] << " " << (c.args.size() > 1 ? c.args[1] : "") << "\n  want: " << c.message
        << "\n  got:  " << got;
  }
}

// What CLI11 refuses comes back as a Status too, naming the flag.
TEST(SchedulerFlagsParse, ParseErrorsNameTheFlag) {
  EXPECT_NE(Problem({"--no-such-flag"}).find("--no-such-flag"), std::string::npos);
  EXPECT_NE(Problem({"--listen"}).find("--listen"), std::string::npos);
}

// The first problem, in the order of --help, is the one reported.
TEST(SchedulerFlagsParse, FirstProblemWins) {
  EXPECT_EQ(Problem({"--http-threads", "1", "--listen", "nowhere"}),
            "--listen: want ADDR:PORT, got \"nowhere\"");
}

}  // namespace
}  // namespace gpushare::scheduler
