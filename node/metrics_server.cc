// See metrics_server.h.
#include "node/metrics_server.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <cstring>
#include <mutex>

#include "base/logfmt.h"

namespace gpushare::node {

using logfmt::Value;

namespace {

void Send(mg_connection* conn, int code, const char* reason, const char* type,
          const std::string& body, const char* extra_header = nullptr) {
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n%s\r\n",
            code, reason, type, body.size(), extra_header != nullptr ? extra_header : "");
  if (std::strcmp(mg_get_request_info(conn)->request_method, "HEAD") != 0)
    mg_write(conn, body.data(), body.size());
}

void SendText(mg_connection* conn, int code, const char* reason, const std::string& body,
              const char* extra_header = nullptr) {
  Send(conn, code, reason, "text/plain; charset=utf-8", body + "\n", extra_header);
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

MetricsServer::MetricsServer(MetricsServerOptions options, MetricsHandlers handlers)
    : options_(std::move(options)), handlers_(std::move(handlers)) {}

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
  if (options.threads < 1) options.threads = 1;
  static std::once_flag once;
  std::call_once(once, [] { mg_init_library(0); });

  std::string ports;
  if (addr.host.empty()) {
    ports = std::to_string(addr.port);
  } else if (addr.host.find(':') != std::string::npos) {
    ports = "[" + addr.host + "]:" + std::to_string(addr.port);
  } else {
    ports = (addr.host == "localhost" ? std::string("127.0.0.1") : addr.host) + ":" +
            std::to_string(addr.port);
  }
  const std::string threads = std::to_string(options.threads);
  const std::string timeout = std::to_string(options.request_timeout_ms);
  const char* config[] = {"listening_ports",
                          ports.c_str(),
                          "num_threads",
                          threads.c_str(),
                          "request_timeout_ms",
                          timeout.c_str(),
                          "enable_keep_alive",
                          "no",
                          "max_request_size",
                          "16384",
                          "listen_backlog",
                          "64",
                          "connection_queue",
                          "16",
                          nullptr};
  std::unique_ptr<MetricsServer> s(new MetricsServer(std::move(options), std::move(handlers)));
  mg_callbacks callbacks{};
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };  // ours log
  mg_init_data init{};
  init.callbacks = &callbacks;
  init.user_data = s.get();
  init.configuration_options = config;
  char text[256] = {};
  unsigned code = 0;
  mg_error_data err{&code, text, sizeof(text)};
  s->ctx_ = mg_start2(&init, &err);
  if (s->ctx_ == nullptr) {
    return Status::Unavailable("--metrics-listen: cannot serve on " + s->options_.listen + ": " +
                               (text[0] != '\0' ? std::string(text) : "civetweb failed to start"));
  }
  mg_set_request_handler(s->ctx_, "/", &MetricsServer::Handle, s.get());
  mg_server_port p[4] = {};
  const int n = mg_get_server_ports(s->ctx_, 4, p);
  s->port_ = n > 0 ? p[0].port : addr.port;
  spdlog::info("event=metrics_listening address={} port={} auth={}", Value(s->options_.listen),
               s->port_, s->options_.auth == MetricsAuth::kNone ? "none" : "kubernetes");
  return s;
}

MetricsServer::~MetricsServer() {
  if (ctx_ != nullptr) mg_stop(ctx_);
}

int MetricsServer::Handle(mg_connection* conn, void* self) {
  return static_cast<MetricsServer*>(self)->Serve(conn);
}

int MetricsServer::Serve(mg_connection* conn) {
  const mg_request_info* ri = mg_get_request_info(conn);
  const std::string method = ri->request_method != nullptr ? ri->request_method : "";
  const std::string path = ri->local_uri != nullptr ? ri->local_uri : "";
  if (method != "GET" && method != "HEAD") {
    SendText(conn, 405, "Method Not Allowed", "only GET and HEAD", "Allow: GET, HEAD\r\n");
    return 405;
  }
  if (path == "/healthz" || path == "/readyz") {
    Probe p = path == "/healthz" ? handlers_.healthz() : handlers_.readyz();
    if (p.ok) {
      SendText(conn, 200, "OK", p.reason);
      return 200;
    }
    SendText(conn, 503, "Service Unavailable", p.reason);
    return 503;
  }
  if (path != "/metrics") {
    SendText(conn, 404, "Not Found", "not found: serves /metrics, /healthz and /readyz");
    return 404;
  }
  if (!options_.unavailable_metrics.empty()) {
    SendText(conn, 503, "Service Unavailable", options_.unavailable_metrics);
    return 503;
  }
  if (options_.auth == MetricsAuth::kKubernetes) {
    const char* h = mg_get_header(conn, "Authorization");
    kube::AuthzDecision d = options_.authorizer->Check(h != nullptr ? h : "");
    switch (d.verdict) {
      case kube::AuthzVerdict::kAllowed:
        break;
      case kube::AuthzVerdict::kUnauthenticated:
        spdlog::debug("event=metrics_denied status=401 reason={}", Value(d.reason));
        SendText(conn, 401, "Unauthorized", "Unauthorized: " + d.reason,
                 "WWW-Authenticate: Bearer realm=\"gpushare-node\"\r\n");
        return 401;
      case kube::AuthzVerdict::kForbidden:
        spdlog::info("event=metrics_denied status=403 user={} reason={}", Value(d.user),
                     Value(d.reason));
        SendText(conn, 403, "Forbidden", "Forbidden: " + d.reason);
        return 403;
      case kube::AuthzVerdict::kError:
        spdlog::warn("event=metrics_auth_unavailable reason={}", Value(d.reason));
        SendText(conn, 503, "Service Unavailable", "cannot check the caller: " + d.reason);
        return 503;
    }
  }
  const std::string body = handlers_.metrics();
  Send(conn, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", body);
  return 200;
}

}  // namespace gpushare::node
