#include "scheduler/http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <deque>
#include <mutex>
#include <set>

#include "deviceplugin/logfmt.h"
#include "scheduler/http_wire.h"
#include "scheduler/wire.h"

namespace gpushare::scheduler {

using logfmt::Value;

namespace {

constexpr size_t kRecvChunk = 64 * 1024;    // one read into the connection buffer (bodies: as much as arrived)
constexpr size_t kMaxQueued = 4096;         // accepted connections waiting for a worker
constexpr int kIdleSliceMs = 200;           // how often an idle worker looks around

bool JsonContentType(const http::RequestHead& req) {
  const std::optional<std::string_view> v = req.Header("content-type");
  if (!v) return true;
  std::string ct(*v);
  for (char& c : ct) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t semi = ct.find(';');
  if (semi != std::string::npos) ct.resize(semi);
  while (!ct.empty() && ct.back() == ' ') ct.pop_back();
  return ct.empty() || ct == "application/json";
}

// "Date: Wed, 02 Dec 2026 10:00:00 GMT", formatted once a second.
std::string DateValue() {
  static std::mutex mu;
  static time_t last = 0;
  static std::string cached;
  const time_t now = std::time(nullptr);
  std::lock_guard<std::mutex> l(mu);
  if (now != last) {
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    cached = buf;
    last = now;
  }
  return cached;
}

using http::Reply;

// The words of every 413, whichever way the body was too large.
std::string BodyTooLarge(size_t limit) {
  return "request body larger than " + std::to_string(limit) + " bytes (--max-body-bytes)";
}

Reply JsonReply(int status, std::string body) {
  Reply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

}  // namespace

std::string NormalizePrefix(const std::string& prefix) {
  std::string p = prefix;
  while (!p.empty() && p.back() == '/') p.pop_back();
  if (!p.empty() && p.front() != '/') p.insert(p.begin(), '/');
  return p;
}

// One accepted connection, served by one worker at a time.
class Connection {
 public:
  Connection(int fd, const HttpServerOptions& options) : fd_(fd), options_(options) {
    limits_.max_body_bytes = options.max_body_bytes;
  }
  // The outcome of reading one request.
  enum class Read { kRequest, kRefused, kGone };
  // Waits until the next request starts (or the connection should be given up: idle too long,
  // the server stops, or `give_up()` says another connection needs the worker).
  bool WaitForRequest(const std::function<bool()>& give_up) {
    if (start_ < in_.size()) return true;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options_.keep_alive_seconds);
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      const int n = ::poll(&p, 1, kIdleSliceMs);
      if (n > 0) return true;  // data, or the peer closed (the read says which)
      if (n < 0 && errno != EINTR) return false;
      if (give_up() || std::chrono::steady_clock::now() >= deadline) return false;
    }
  }
  // Reads one request: its head, then its body (after "100 Continue" when asked for).
  Read ReadRequest(http::RequestHead* head, std::string* body, http::Refusal* refusal) {
    size_t scanned = 0;  // bytes after start_ known to hold no end of head
    for (;;) {
      // The parser runs only once the head may be complete (or too long): a head that trickles
      // in a byte at a time must not be parsed again for every byte.
      const std::string_view pending = std::string_view(in_).substr(start_);
      if (!MayEndHead(pending, &scanned) && pending.size() <= limits_.max_head_bytes) {
        if (!Fill()) return Read::kGone;
        continue;
      }
      http::HeadResult h = http::ParseRequestHead(pending, limits_);
      if (h.kind == http::HeadResult::Kind::kDone) {
        start_ += h.consumed;
        *head = std::move(h.head);
        break;
      }
      if (h.kind == http::HeadResult::Kind::kRefused) {
        *refusal = std::move(h.refusal);
        return Read::kRefused;
      }
      if (!Fill()) return Read::kGone;  // (leading blank lines only; scanned moves past them)
    }
    body->clear();
    if (!head->chunked && head->content_length > limits_.max_body_bytes) {
      *refusal = {413, BodyTooLarge(limits_.max_body_bytes), true};
      drain_ = !head->expect_continue;  // the client sends the body unless it waits for "100 Continue"
      return Read::kRefused;
    }
    if (!head->chunked && head->content_length == 0) return Read::kRequest;
    if (head->expect_continue && !SendAll("HTTP/1.1 100 Continue\r\n\r\n", {})) return Read::kGone;
    if (!head->chunked) {
      // Straight into the body: as many bytes a read as have arrived, no poll in between.
      const size_t length = static_cast<size_t>(head->content_length);
      const size_t have = std::min(length, in_.size() - start_);
      body->resize(length);
      std::memcpy(body->data(), in_.data() + start_, have);
      start_ += have;
      for (size_t got = have; got < length;) {
        const ssize_t n = ::recv(fd_, body->data() + got, length - got, 0);
        if (n <= 0) {
          if (n < 0 && errno == EINTR) continue;
          *refusal = {400, "could not read the request body (truncated or malformed transfer)", true};
          return n == 0 ? Read::kGone : Read::kRefused;
        }
        got += static_cast<size_t>(n);
      }
      Compact();
      return Read::kRequest;
    }
    http::ChunkedDecoder decoder(options_.max_body_bytes);
    for (;;) {
      size_t used = 0;
      const http::ChunkedDecoder::State s = decoder.Feed(std::string_view(in_).substr(start_), body, &used);
      start_ += used;
      if (s == http::ChunkedDecoder::State::kDone) break;
      if (s == http::ChunkedDecoder::State::kError) {
        *refusal = decoder.refusal();
        drain_ = refusal->status == 413;
        if (drain_) refusal->reason = BodyTooLarge(limits_.max_body_bytes);
        return Read::kRefused;
      }
      if (!Fill()) {
        *refusal = {400, "could not read the request body (truncated or malformed transfer)", true};
        return Read::kRefused;
      }
    }
    Compact();
    return Read::kRequest;
  }
  bool Send(const Reply& r, bool head_only) {
    const std::string head = http::ResponseHead(r.status, r.content_type, r.body.size(), r.close,
                                                WithDate(r.headers));
    return SendAll(head, head_only ? std::string_view() : std::string_view(r.body));
  }
  // After a refusal of a body the client is still sending: read and drop what it sends (up to
  // a bound, within the read timeout) so that it sees the reply instead of a reset.
  void DrainAfterRefusal() {
    if (!drain_) return;
    ::shutdown(fd_, SHUT_WR);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options_.read_timeout_seconds);
    size_t drained = 0;
    const size_t bound = std::max<size_t>(64u << 20, 4 * options_.max_body_bytes);
    std::vector<char> sink(kRecvChunk);
    while (drained < bound && std::chrono::steady_clock::now() < deadline) {
      const ssize_t n = ::recv(fd_, sink.data(), sink.size(), 0);
      if (n <= 0 && !(n < 0 && errno == EINTR)) break;
      if (n > 0) drained += static_cast<size_t>(n);
    }
  }

 private:
  // Whether `buf` holds an empty line ("\n\n" or "\n\r\n") at or after *scanned; moves
  // *scanned past what cannot start one.
  static bool MayEndHead(std::string_view buf, size_t* scanned) {
    for (size_t i = *scanned; i < buf.size(); ++i) {
      const void* nl = std::memchr(buf.data() + i, '\n', buf.size() - i);
      if (nl == nullptr) break;
      i = static_cast<size_t>(static_cast<const char*>(nl) - buf.data());
      if (i + 1 >= buf.size() || (buf[i + 1] == '\r' && i + 2 >= buf.size())) {
        *scanned = i;  // undecided until more arrives
        return false;
      }
      if (buf[i + 1] == '\n' || (buf[i + 1] == '\r' && buf[i + 2] == '\n')) {
        *scanned = i + 1;  // if the parser still wants more (leading blank lines), go on from here
        return true;
      }
    }
    *scanned = buf.size();
    return false;
  }
  // Reads what has arrived (blocking until something has, up to the read timeout).
  // (Heads are bounded by the parser's limit and chunked bodies are consumed as they arrive, so
  // the buffer stays small.)
  bool Fill() {
    Compact();
    const size_t old = in_.size();
    const size_t want = old < 16384 ? 16384 : kRecvChunk;
    in_.resize(old + want);
    for (;;) {
      const ssize_t n = ::recv(fd_, in_.data() + old, want, 0);
      if (n < 0 && errno == EINTR) continue;
      in_.resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
      return n > 0;
    }
  }
  void Compact() {
    if (start_ == 0) return;
    in_.erase(0, start_);
    start_ = 0;
  }
  std::vector<std::pair<std::string, std::string>> WithDate(const std::vector<std::pair<std::string, std::string>>& h) {
    std::vector<std::pair<std::string, std::string>> out = h;
    out.emplace_back("Date", DateValue());
    return out;
  }
  bool SendAll(std::string_view a, std::string_view b) {
    iovec iov[2] = {{const_cast<char*>(a.data()), a.size()}, {const_cast<char*>(b.data()), b.size()}};
    int count = b.empty() ? 1 : 2;
    iovec* v = iov;
    while (count > 0) {
      msghdr m{};
      m.msg_iov = v;
      m.msg_iovlen = static_cast<size_t>(count);
      const ssize_t n = ::sendmsg(fd_, &m, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      size_t left = static_cast<size_t>(n);
      while (count > 0 && left >= v->iov_len) {
        left -= v->iov_len;
        ++v;
        --count;
      }
      if (count > 0) {
        v->iov_base = static_cast<char*>(v->iov_base) + left;
        v->iov_len -= left;
      }
    }
    return true;
  }

  int fd_;
  const HttpServerOptions& options_;
  http::Limits limits_;
  std::string in_;    // bytes read and not yet parsed start at start_
  size_t start_ = 0;
  bool drain_ = false;
};

struct HttpServer::Impl {
  int listen_fd = -1;
  int wake[2] = {-1, -1};  // a pipe: Stop() wakes the acceptor
  std::thread acceptor;
  std::vector<std::thread> workers;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<int> queue;   // accepted, waiting for a worker
  std::set<int> serving;   // being served (Stop shuts them down)
  bool stopping = false;
  std::atomic<size_t> queued{0};
};

HttpServer::HttpServer(Extender& extender, HttpServerOptions options, std::function<Readiness()> readiness,
                       std::function<std::string()> metrics)
    : extender_(extender),
      options_(std::move(options)),
      readiness_(std::move(readiness)),
      metrics_(std::move(metrics)),
      prefix_(NormalizePrefix(options_.url_prefix)) {}

HttpServer::~HttpServer() { Stop(); }

namespace {

// The refusal reply for a request that could not be read or is not served.
Reply Refused(int status, const std::string& why, bool close) {
  Reply r = JsonReply(status, EncodeError(why));
  r.close = close;
  return r;
}

}  // namespace

Status HttpServer::Start() {
  if (impl_) return Status::FailedPrecondition("HTTP server already started");
  auto impl = std::make_unique<Impl>();
  const std::string where = options_.host + ":" + std::to_string(options_.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(options_.port);
  if (const int rc = ::getaddrinfo(options_.host.empty() ? nullptr : options_.host.c_str(), port.c_str(), &hints, &res);
      rc != 0)
    return Status::Unavailable("cannot listen on " + where + ": " + gai_strerror(rc));
  std::string error = "no address";
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      impl->listen_fd = fd;
      break;
    }
    error = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (impl->listen_fd < 0) return Status::Unavailable("cannot listen on " + where + ": " + error);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(impl->listen_fd, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (::pipe2(impl->wake, O_CLOEXEC) != 0) {
    ::close(impl->listen_fd);
    return Status::Unavailable("cannot listen on " + where + ": pipe: " + std::strerror(errno));
  }
  impl_ = std::move(impl);
  Impl* im = impl_.get();

  for (int i = 0; i < std::max(2, options_.threads); ++i) {
    im->workers.emplace_back([this, im] {
      for (;;) {
        int fd;
        {
          std::unique_lock<std::mutex> l(im->mu);
          im->cv.wait(l, [im] { return im->stopping || !im->queue.empty(); });
          if (im->stopping) return;
          fd = im->queue.front();
          im->queue.pop_front();
          im->queued.fetch_sub(1);
          im->serving.insert(fd);
        }
        Serve(fd, [im] { return im->queued.load() > 0; });
        {
          std::lock_guard<std::mutex> l(im->mu);
          im->serving.erase(fd);
        }
        ::close(fd);
      }
    });
  }
  im->acceptor = std::thread([this, im] {
    for (;;) {
      pollfd p[2] = {{im->listen_fd, POLLIN, 0}, {im->wake[0], POLLIN, 0}};
      if (::poll(p, 2, -1) < 0 && errno != EINTR) break;
      if (p[1].revents != 0) break;
      if ((p[0].revents & POLLIN) == 0) continue;
      const int fd = ::accept4(im->listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      timeval tv{options_.read_timeout_seconds, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      std::unique_lock<std::mutex> l(im->mu);
      if (im->stopping) {
        ::close(fd);
        break;
      }
      if (im->queue.size() >= kMaxQueued) {
        l.unlock();
        spdlog::warn("event=http_refused status=503 error=\"{} connections already wait for a worker\"", kMaxQueued);
        const std::string reply = EncodeError("too many connections waiting; retry");
        const std::string head = http::ResponseHead(503, "application/json", reply.size(), true);
        (void)::send(fd, (head + reply).data(), head.size() + reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ::close(fd);
        continue;
      }
      im->queue.push_back(fd);
      im->queued.fetch_add(1);
      im->cv.notify_one();
    }
  });
  return Status::Ok();
}

void HttpServer::Stop() {
  if (!impl_) return;
  Impl* im = impl_.get();
  {
    std::lock_guard<std::mutex> l(im->mu);
    im->stopping = true;
    for (int fd : im->serving) ::shutdown(fd, SHUT_RDWR);  // unblocks their reads and writes
  }
  im->cv.notify_all();
  const char byte = 1;
  (void)!::write(im->wake[1], &byte, 1);
  if (im->acceptor.joinable()) im->acceptor.join();
  for (std::thread& t : im->workers)
    if (t.joinable()) t.join();
  for (int fd : im->queue) ::close(fd);
  ::close(im->listen_fd);
  ::close(im->wake[0]);
  ::close(im->wake[1]);
  impl_.reset();
}

void HttpServer::Serve(int fd, const std::function<bool()>& others_waiting) {
  Connection c(fd, options_);
  const std::string served = prefix_ + "/filter, " + prefix_ + "/prioritize, " + prefix_ + "/bind, /healthz, /readyz, /metrics";
  auto stopping = [this] {
    std::lock_guard<std::mutex> l(impl_->mu);
    return impl_->stopping;
  };
  http::RequestHead head;
  std::string body;
  for (;;) {
    if (!c.WaitForRequest([&] { return others_waiting() || stopping(); })) return;
    http::Refusal refusal;
    const Connection::Read read = c.ReadRequest(&head, &body, &refusal);
    if (read == Connection::Read::kGone) return;
    if (read == Connection::Read::kRefused) {
      spdlog::warn("event=http_refused method={} path={} status={} error={}", Value(head.method), Value(head.path),
                   refusal.status, Value(refusal.reason));
      (void)c.Send(Refused(refusal.status, refusal.reason, true), false);
      c.DrainAfterRefusal();
      return;
    }
    Reply r = Route(head, body, served);
    const bool keep = head.keep_alive && !r.close && !stopping();
    r.close = !keep;
    if (!c.Send(r, head.method == "HEAD") || !keep) return;
  }
}

Reply HttpServer::Route(const http::RequestHead& head, std::string_view body, const std::string& served) {
  using Verb = HttpReply (Extender::*)(std::string_view);
  Verb verb = nullptr;
  if (head.path == prefix_ + "/filter") verb = &Extender::Filter;
  if (head.path == prefix_ + "/prioritize") verb = &Extender::Prioritize;
  if (head.path == prefix_ + "/bind") verb = &Extender::Bind;
  const bool get = head.method == "GET" || head.method == "HEAD";
  try {
    if (verb != nullptr) {
      if (head.method != "POST") {
        Reply r = JsonReply(405, EncodeError(head.method + " " + head.path + ": the extender verbs take POST"));
        r.headers.emplace_back("Allow", "POST");
        return r;
      }
      if (!JsonContentType(head))
        return JsonReply(415, EncodeError("Content-Type must be application/json, got \"" +
                                          std::string(head.Header("content-type").value_or("")) + "\""));
      HttpReply out = (extender_.*verb)(body);
      return JsonReply(out.code, std::move(out.body));
    }
    if (get && head.path == "/healthz") {
      Reply r;
      r.content_type = "text/plain";
      r.body = "ok\n";
      return r;
    }
    if (get && head.path == "/readyz") {
      const Readiness ready = readiness_ ? readiness_() : Readiness{true, ""};
      Reply r;
      r.status = ready.ready ? 200 : 503;
      r.content_type = "text/plain";
      r.body = ready.ready ? "ok\n" : "not ready: " + ready.reason + "\n";
      return r;
    }
    if (get && head.path == "/metrics") {
      Reply r;
      r.content_type = "text/plain; version=0.0.4";
      r.body = metrics_ ? metrics_() : std::string();
      return r;
    }
  } catch (const std::exception& e) {
    spdlog::error("event=handler_exception path={} error={}", Value(head.path), Value(e.what()));
    return JsonReply(500, EncodeError(std::string("internal error: ") + e.what()));
  } catch (...) {
    return JsonReply(500, EncodeError("internal error"));
  }
  const std::string why = "no endpoint " + head.method + " " + head.path + " (served: " + served + ")";
  spdlog::warn("event=http_refused method={} path={} status=404 error={}", Value(head.method), Value(head.path), Value(why));
  return JsonReply(404, EncodeError(why));
}

}  // namespace gpushare::scheduler
