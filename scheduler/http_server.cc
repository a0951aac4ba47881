#include "scheduler/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdlib>

#include "deviceplugin/logfmt.h"
#include "scheduler/wire.h"

namespace gpushare::scheduler {

using logfmt::Value;

struct HttpServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> done{false};
};

std::string NormalizePrefix(const std::string& prefix) {
  std::string p = prefix;
  while (!p.empty() && p.back() == '/') p.pop_back();
  if (!p.empty() && p.front() != '/') p.insert(p.begin(), '/');
  return p;
}

HttpServer::HttpServer(Extender& extender, HttpServerOptions options, std::function<Readiness()> readiness,
                       std::function<std::string()> metrics)
    : extender_(extender),
      options_(std::move(options)),
      readiness_(std::move(readiness)),
      metrics_(std::move(metrics)),
      prefix_(NormalizePrefix(options_.url_prefix)) {}

HttpServer::~HttpServer() { Stop(); }

namespace {

void Json(httplib::Response& res, int code, const std::string& body) {
  res.status = code;
  res.set_content(body, "application/json");
}

bool JsonContentType(const httplib::Request& req) {
  if (!req.has_header("Content-Type")) return true;
  std::string ct = req.get_header_value("Content-Type");
  for (char& c : ct) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t semi = ct.find(';');
  if (semi != std::string::npos) ct.resize(semi);
  while (!ct.empty() && ct.back() == ' ') ct.pop_back();
  return ct.empty() || ct == "application/json";
}

}  // namespace

Status HttpServer::Start() {
  if (impl_) return Status::FailedPrecondition("HTTP server already started");
  impl_ = std::make_unique<Impl>();
  httplib::Server& s = impl_->server;
  const size_t threads = static_cast<size_t>(std::max(2, options_.threads));
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_tcp_nodelay(true);
  s.set_keep_alive_max_count(100000);
  s.set_keep_alive_timeout(60);
  s.set_payload_max_length(options_.max_body_bytes);
  s.set_read_timeout(options_.read_timeout_seconds, 0);
  s.set_write_timeout(options_.read_timeout_seconds, 0);

  // Replies are never compressed. kube-scheduler's Go transport sends `Accept-Encoding: gzip`
  // on every request, and Debian's cpp-httplib (built with zlib and brotli) would then gzip
  // every application/json reply: about 0.7 ms of CPU per 78 KB filter reply at 5,000 nodes,
  // more than the whole decision, to save microseconds of loopback or in-cluster transfer.
  // httplib decides from the request's Accept-Encoding alone, so the header is dropped before
  // routing (identity is always acceptable, RFC 9110 §12.5.3). The Request is httplib's own
  // non-const object, handed to the handler as const.
  s.set_pre_routing_handler([](const httplib::Request& req, httplib::Response&) {
    const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
    return httplib::Server::HandlerResponse::Unhandled;
  });

  const std::string served = prefix_ + "/filter, " + prefix_ + "/prioritize, " + prefix_ + "/bind, /healthz, /readyz, /metrics";
  const size_t limit = options_.max_body_bytes;
  s.set_error_handler(httplib::Server::HandlerWithResponse([served, limit](const httplib::Request& req,
                                                                           httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string why;
    switch (res.status) {
      case 404: why = "no endpoint " + req.method + " " + req.path + " (served: " + served + ")"; break;
      case 413: why = "request body larger than " + std::to_string(limit) + " bytes (--max-body-bytes)"; break;
      case 400: why = "malformed HTTP request"; break;
      default: why = "HTTP " + std::to_string(res.status); break;
    }
    // A request line that httplib could not parse (e.g. the rest of a refused body) has no
    // method; that is noise, not a refusal an operator can act on.
    spdlog::log(req.method.empty() ? spdlog::level::debug : spdlog::level::warn,
                "event=http_refused method={} path={} status={} error={}", req.method, Value(req.path), res.status,
                Value(why));
    Json(res, res.status, EncodeError(why));
    return httplib::Server::HandlerResponse::Handled;
  }));

  using Verb = HttpReply (Extender::*)(std::string_view);
  auto route = [this, &s](const std::string& verb, Verb fn) {
    const std::string path = prefix_ + "/" + verb;
    // The body is read here, not by httplib: its payload limit does not apply to chunked
    // bodies, so the cap is enforced while reading.
    s.Post(path, [this, fn, path](const httplib::Request& req, httplib::Response& res,
                                  const httplib::ContentReader& reader) {
      try {
        if (!JsonContentType(req)) {
          Json(res, 415, EncodeError("Content-Type must be application/json, got \"" +
                                     req.get_header_value("Content-Type") + "\""));
          return;
        }
        std::string body;
        bool too_big = false;
        const size_t limit = options_.max_body_bytes;
        // One allocation for the announced length (78 KB at 5,000 nodes), never beyond the cap.
        if (req.has_header("Content-Length")) {
          const unsigned long long announced = std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10);
          body.reserve(static_cast<size_t>(std::min<unsigned long long>(announced, limit)));
        }
        const bool read = reader([&](const char* data, size_t n) {
          if (body.size() + n > limit) {
            too_big = true;
            return false;
          }
          body.append(data, n);
          return true;
        });
        if (too_big || (!read && res.status == 413)) {
          spdlog::warn("event=http_refused method=POST path={} status=413 bytes_read={}", Value(path), body.size());
          res.set_header("Connection", "close");
          Json(res, 413, EncodeError("request body larger than " + std::to_string(limit) + " bytes (--max-body-bytes)"));
          return;
        }
        if (!read) {
          Json(res, 400, EncodeError("could not read the request body (truncated or malformed transfer)"));
          return;
        }
        HttpReply r = (extender_.*fn)(body);
        Json(res, r.code, r.body);
      } catch (const std::exception& e) {
        spdlog::error("event=handler_exception path={} error={}", Value(path), Value(e.what()));
        Json(res, 500, EncodeError(std::string("internal error: ") + e.what()));
      } catch (...) {
        Json(res, 500, EncodeError("internal error"));
      }
    });
    auto wrong = [path](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Allow", "POST");
      Json(res, 405, EncodeError(req.method + " " + path + ": the extender verbs take POST"));
    };
    s.Get(path, wrong);
    s.Put(path, wrong);
    s.Delete(path, wrong);
    s.Patch(path, wrong);
  };
  route("filter", &Extender::Filter);
  route("prioritize", &Extender::Prioritize);
  route("bind", &Extender::Bind);

  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  s.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    Readiness r = readiness_ ? readiness_() : Readiness{true, ""};
    res.status = r.ready ? 200 : 503;
    res.set_content(r.ready ? "ok\n" : "not ready: " + r.reason + "\n", "text/plain");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_ ? metrics_() : std::string(), "text/plain; version=0.0.4");
  });

  port_ = options_.port == 0 ? s.bind_to_any_port(options_.host)
                             : (s.bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port_ <= 0) {
    impl_.reset();
    return Status::Unavailable("cannot listen on " + options_.host + ":" + std::to_string(options_.port));
  }
  impl_->thread = std::thread([this] {
    impl_->server.listen_after_bind();
    impl_->done.store(true);
  });
  while (!impl_->server.is_running() && !impl_->done.load())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return Status::Ok();
}

void HttpServer::Stop() {
  if (!impl_) return;
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_.reset();
}

}  // namespace gpushare::scheduler
