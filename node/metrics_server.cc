// See metrics_server.h.
#include "node/metrics_server.h"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>

#include <charconv>

#include "base/logfmt.h"
#include "net/http_server.h"

namespace gpushare::node {

using logfmt::Value;

namespace {

// A reply as the node sends it: text, never cached.
net::Reply Text(int status, std::string body,
                std::string content_type = "text/plain; charset=utf-8") {
  net::Reply r = net::TextReply(status, std::move(body), std::move(content_type));
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

}  // namespace

Result<MetricsAuth> ParseMetricsAuth(std::string_view text) {
  if (text == "kubernetes") return MetricsAuth::kKubernetes;
  if (text == "none") return MetricsAuth::kNone;
  return Status::InvalidArgument("--metrics-auth: must be kubernetes or none, got \"" +
                                 std::string(text) + "\"");
}

Result<ListenAddress> ParseListenAddress(std::string_view text) {
  const std::string bad = "--metrics-listen: \"" + std::string(text) + "\" ";
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos)
    return Status::InvalidArgument(bad + "is not HOST:PORT or :PORT");
  ListenAddress a;
  std::string_view host = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    in6_addr v6{};
    if (inet_pton(AF_INET6, std::string(host).c_str(), &v6) != 1)
      return Status::InvalidArgument(bad + "has an invalid IPv6 address");
  } else if (host.find(':') != std::string_view::npos) {
    return Status::InvalidArgument(bad + "needs brackets around an IPv6 address: [ADDR]:PORT");
  }
  a.host = std::string(host);
  int p = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p < 0 || p > 65535)
    return Status::InvalidArgument(bad + "has no valid port (0..65535)");
  a.port = p;
  return a;
}

bool IsLoopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

std::vector<net::Route> MetricsRoutes(const MetricsServerOptions& options,
                                      MetricsHandlers handlers) {
  auto probe = [](std::function<Probe()> check) {
    return [check = std::move(check)](const net::Request&) {
      const Probe p = check();
      return Text(p.ok ? 200 : 503, p.reason + "\n");
    };
  };
  const std::string unavailable = options.unavailable_metrics;
  const bool check_callers = options.auth == MetricsAuth::kKubernetes;
  std::shared_ptr<kube::RequestAuthorizer> authorizer = options.authorizer;
  auto metrics = [unavailable, check_callers, authorizer,
                  exposition = std::move(handlers.metrics)](const net::Request& req) {
    if (!unavailable.empty()) return Text(503, unavailable + "\n");
    if (check_callers) {
      const kube::AuthzDecision d =
          authorizer->Check(req.head.Header("authorization").value_or(std::string_view()));
      switch (d.verdict) {
        case kube::AuthzVerdict::kAllowed:
          break;
        case kube::AuthzVerdict::kUnauthenticated: {
          spdlog::debug("event=metrics_denied status=401 reason={}", Value(d.reason));
          net::Reply r = Text(401, "Unauthorized: " + d.reason + "\n");
          r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"gpushare-node\"");
          return r;
        }
        case kube::AuthzVerdict::kForbidden:
          spdlog::info("event=metrics_denied status=403 user={} reason={}", Value(d.user),
                       Value(d.reason));
          return Text(403, "Forbidden: " + d.reason + "\n");
        case kube::AuthzVerdict::kError:
          spdlog::warn("event=metrics_auth_unavailable reason={}", Value(d.reason));
          return Text(503, "cannot check the caller: " + d.reason + "\n");
      }
    }
    return Text(200, exposition(), "text/plain; version=0.0.4; charset=utf-8");
  };
  return {net::GetRoute("/metrics", net::Lane::kWorker, std::move(metrics)),
          net::GetRoute("/healthz", net::Lane::kLeader, probe(std::move(handlers.healthz))),
          net::GetRoute("/readyz", net::Lane::kLeader, probe(std::move(handlers.readyz)))};
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(MetricsServerOptions options,
                                                            MetricsHandlers handlers) {
  GPUSHARE_ASSIGN_OR_RETURN(ListenAddress addr, ParseListenAddress(options.listen));
  const bool serves_metrics = options.unavailable_metrics.empty();
  if (serves_metrics && options.auth == MetricsAuth::kNone && !IsLoopback(addr.host)) {
    return Status::InvalidArgument(
        "--metrics-auth=none: only allowed with a loopback --metrics-listen address (such as "
        "127.0.0.1:9445), got \"" +
        options.listen +
        "\"; use --metrics-auth=kubernetes so that callers are authenticated and authorized");
  }
  if (serves_metrics && options.auth == MetricsAuth::kKubernetes && !options.authorizer) {
    return Status::InvalidArgument(
        "--metrics-auth=kubernetes: needs the Kubernetes API (--kubeconfig or in-cluster) to "
        "check callers' tokens");
  }
  net::HttpServerOptions o;
  o.host = addr.host == "localhost" ? std::string("127.0.0.1") : addr.host;
  o.port = addr.port;
  o.threads = std::max(2, options.threads);
  o.bind_threads = 1;  // (no route on that lane)
  o.header_timeout = std::chrono::milliseconds(options.request_timeout_ms);
  o.read_timeout = std::chrono::milliseconds(options.request_timeout_ms);
  o.max_head_bytes = 16 * 1024;
  o.max_body_bytes = 64 * 1024;
  o.max_connections = 64;
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  s->server_ = std::make_unique<net::HttpServer>(o, MetricsRoutes(options, std::move(handlers)));
  if (Status st = s->server_->Start(); !st.ok())
    return Status::Unavailable("--metrics-listen: cannot serve on " + options.listen + ": " +
                               st.message());
  s->port_ = s->server_->port();
  spdlog::info("event=metrics_listening address={} port={} auth={}", Value(options.listen),
               s->port_, options.auth == MetricsAuth::kNone ? "none" : "kubernetes");
  return s;
}

MetricsServer::~MetricsServer() = default;

}  // namespace gpushare::node
