#include "net/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <deque>
#include <list>
#include <map>
#include <thread>
#include <unordered_set>
#include <vector>

#include "base/logfmt.h"
#include "base/sync.h"
#include "base/unique_fd.h"
#include "net/http_wire.h"

namespace gpushare::net {

using Steady = std::chrono::steady_clock;
using http::Reply;
using logfmt::Value;

namespace {

constexpr size_t kReadChunk = 64 * 1024;   // one read of a head (bodies: as much as has arrived)
constexpr size_t kBodyReserve = 1u << 20;  // room made for a Content-Length body before it arrives
constexpr size_t kQuickBodyBytes = 1u << 20;  // larger requests are not served by the leader itself
constexpr size_t kPumpBytes = 1u << 20;  // read from one connection before the others get a turn
constexpr int kMaxEvents = 256;
constexpr int kAcceptBurst = 256;   // connections accepted per readiness of the listener
constexpr rlim_t kFdReserve = 256;  // descriptors left to the rest of the process
constexpr auto kTlsCheckEvery = std::chrono::seconds(1);

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

// The Date header's value, formatted once a second.
struct DateCache {
  Mutex mu;
  time_t last GPUSHARE_GUARDED_BY(mu) = 0;
  std::string text GPUSHARE_GUARDED_BY(mu);
};

// "Date: Wed, 02 Dec 2026 10:00:00 GMT", formatted once a second.
std::string DateValue() {
  static DateCache cache;
  const time_t now = std::time(nullptr);
  MutexLock l(&cache.mu);
  if (now != cache.last) {
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    cache.text = buf;
    cache.last = now;
  }
  return cache.text;
}

// The words of every 413, whichever way the body was too large.
std::string BodyTooLarge(size_t limit) {
  return "request body larger than " + std::to_string(limit) + " bytes (--max-body-bytes)";
}

// "10s", "1.5s", "250ms".
std::string Seconds(std::chrono::milliseconds d) {
  const int64_t ms = d.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  if (ms < 1000) return std::to_string(ms) + "ms";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3gs", static_cast<double>(ms) / 1000.0);
  return buf;
}

std::string Peer(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "?";
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
    port = ntohs(v4->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
    port = ntohs(v6->sin6_port);
  }
  return "[" + std::string(host) + "]:" + std::to_string(port);
}

// Whether `buf` holds an empty line ("\n\n" or "\n\r\n") at or after *scanned; moves *scanned
// past what cannot start one. (The head parser runs only once the head may be complete: a head
// that trickles in a byte at a time is not parsed again for every byte.)
bool MayEndHead(std::string_view buf, size_t* scanned) {
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

// OpenSSL writes with write(2), which raises SIGPIPE when the peer has gone (plain sockets use
// MSG_NOSIGNAL). The server's own threads block it, so such a write fails with EPIPE instead of
// ending the process (the signal stays pending on the thread, harmlessly).
void BlockSigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// A connection's input bytes: like a std::string, but growing without zero-filling, so that
// room made for a body (and read into by the kernel) costs resident memory only for the bytes
// that really arrive.
class Bytes {
 public:
  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }
  char* data() { return data_.get(); }
  std::string_view view() const { return {data_.get(), size_}; }
  void reserve(size_t n) {
    if (n <= cap_) return;
    std::unique_ptr<char[]> bigger(new char[n]);  // (uninitialised)
    if (size_ > 0) std::memcpy(bigger.get(), data_.get(), size_);
    data_ = std::move(bigger);
    cap_ = n;
  }
  // Room for `n` more bytes at the end (growing geometrically); Commit() says how many came.
  char* Extend(size_t n) {
    if (size_ + n > cap_) reserve(std::max(size_ + n, 2 * cap_));
    return data_.get() + size_;
  }
  void Commit(size_t n) { size_ += n; }
  void append(const char* p, size_t n) {
    if (n == 0) return;
    std::memcpy(Extend(n), p, n);
    size_ += n;
  }
  void EraseFront(size_t n) {
    if (n < size_) std::memmove(data_.get(), data_.get() + n, size_ - n);
    size_ -= std::min(n, size_);
  }
  void Free() {
    data_.reset();
    size_ = cap_ = 0;
  }

 private:
  std::unique_ptr<char[]> data_;
  size_t size_ = 0, cap_ = 0;
};

// The outcome of one read, write or handshake step on a non-blocking connection.
enum class Io { kDone, kWantRead, kWantWrite, kEof, kError };

}  // namespace

Reply JsonReply(int status, std::string body) {
  Reply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Reply TextReply(int status, std::string body, std::string content_type) {
  Reply r;
  r.status = status;
  r.content_type = std::move(content_type);
  r.body = std::move(body);
  return r;
}

Route GetRoute(std::string path, Lane lane, std::function<Reply(const Request&)> handle,
               bool subtree) {
  Route r;
  r.method = "GET";
  r.path = std::move(path);
  r.subtree = subtree;
  r.lane = lane;
  r.handle = std::move(handle);
  return r;
}

Route JsonPost(std::string path, Lane lane, std::function<Reply(std::string_view body)> handle) {
  Route r;
  r.method = "POST";
  r.path = std::move(path);
  r.lane = lane;
  r.handle = [handle = std::move(handle)](const Request& req) {
    if (!JsonContentType(req.head))
      return JsonReply(415,
                       ErrorJson("Content-Type must be application/json, got \"" +
                                 std::string(req.head.Header("content-type").value_or("")) + "\""));
    return handle(req.body);
  };
  return r;
}

// One accepted connection. The leader owns it, except while a thread serves its request
// (kBusy): then only that thread touches it, and hands it back through Impl::back.
struct HttpServer::Conn {
  enum class State { kHandshake, kIdle, kHead, kBody, kBusy, kWriting, kDraining, kDead };
  // What follows once the pending output is written.
  enum class After { kNext, kClose, kDrain, kBody };

  UniqueFd fd;
  SSL* ssl = nullptr;
  bool peeked = false;  // TLS: the first bytes were looked at (plain HTTP to the TLS port?)
  State state = State::kIdle;
  // Input: bytes read and not yet parsed start at `start`.
  Bytes in;
  size_t start = 0;
  size_t scanned = 0;  // bytes after `start` known to hold no end of head
  http::RequestHead head;
  const Route* route = nullptr;  // the head's route (nullptr: none, a 404), found once per request
  std::string_view rest;         // what follows a subtree route's path in head.path
  // A Content-Length body is read in place, into `in` after its head (no copy): it starts at
  // `body_start` and has `body_length` bytes. A chunked body is decoded into `body`.
  size_t body_start = 0;
  uint64_t body_length = 0;
  std::string body;
  std::unique_ptr<http::ChunkedDecoder> chunked;
  std::string_view request_body;  // what the serving thread hands to the handler
  // Output.
  std::string out_head, out_body;
  size_t out_off = 0;
  After after = After::kNext;
  Io want = Io::kWantRead;  // what the connection waits for; the serving thread's write outcome
  bool head_only = false;
  size_t drained = 0;
  // The leader's bookkeeping.
  Steady::time_point request_start{};
  std::multimap<Steady::time_point, Conn*>::iterator timer;
  bool timed = false;
  std::list<Conn*>* list = nullptr;  // Impl::idle or Impl::reading
  std::list<Conn*>::iterator where;
  size_t charged = 0;  // bytes counted in Impl::buffered
  bool registered = false;
  // Set by a serving thread that re-arms the socket itself (see Impl::Serve): the leader waits
  // for it to clear before touching the connection (its descriptor must not be closed and
  // reused while that epoll_ctl is under way).
  bool rearmed = false;
  std::atomic<bool> rearming{false};

  size_t Pending() const { return out_head.size() + out_body.size() - out_off; }
};

struct HttpServer::Impl {
  using State = Conn::State;
  using After = Conn::After;

  HttpServer* server = nullptr;
  const HttpServerOptions* o = nullptr;
  http::Limits limits;
  UniqueFd listen_fd, epoll_fd, wake_fd;
  UniqueFd spare_fd;  // /dev/null, given up to take (and end) a connection when descriptors run out
  std::unique_ptr<TlsServerContext> tls;
  size_t max_connections = 0, max_buffered = 0;
  std::vector<std::thread> threads;
  std::atomic<bool> stopping{false};

  // Complete requests waiting for a thread, and the lead (Loop()).
  Mutex mu;
  CondVar cv;
  std::deque<Conn*> ready GPUSHARE_GUARDED_BY(mu);
  bool leading GPUSHARE_GUARDED_BY(mu) = false;
  bool stop_workers GPUSHARE_GUARDED_BY(mu) = false;
  // Connections a serving thread is done with; `wake_pending`: the eventfd was written and no
  // leader has drained `back` since.
  Mutex back_mu;
  std::vector<Conn*> back GPUSHARE_GUARDED_BY(back_mu);
  bool wake_pending GPUSHARE_GUARDED_BY(back_mu) = false;
  // Binds run on threads of their own (BindLoop), started as needed up to o->bind_threads: a
  // bind waits on the API server (tens of ms, seconds at worst), and the pool above must never
  // wait with it, so filter and prioritize are never queued behind binds. Those waiting for a
  // thread wait in `bind_queue`, holding nothing but their connection.
  Mutex bind_mu;
  CondVar bind_cv;
  std::deque<Conn*> bind_queue GPUSHARE_GUARDED_BY(bind_mu);
  int bind_live GPUSHARE_GUARDED_BY(bind_mu) = 0;  // bind threads (detached; Stop waits)
  int bind_idle GPUSHARE_GUARDED_BY(bind_mu) = 0;
  bool bind_stop GPUSHARE_GUARDED_BY(bind_mu) = false;
  std::atomic<uint64_t> n_binds{0};  // being served now
  std::atomic<uint64_t> n_binds_peak{0};

  // The leader's own (the lead passes under `mu`, which orders one leader's writes before the
  // next one's reads).
  std::vector<epoll_event> events = std::vector<epoll_event>(kMaxEvents);
  std::vector<Conn*> found;  // complete requests of this round
  std::unordered_set<Conn*> conns;
  std::vector<Conn*> graveyard;  // closed during this round of events; deleted after it
  std::vector<Conn*> again;      // read their share; more may be waiting (TLS: inside OpenSSL)
  std::multimap<Steady::time_point, Conn*> timers;
  std::list<Conn*> idle;     // kIdle, oldest first
  std::list<Conn*> reading;  // kHandshake, kHead, kBody, oldest first
  size_t buffered = 0;       // request bytes held (heads, bodies, pipelined input)
  Steady::time_point next_tls_check{};
  std::vector<char> scratch = std::vector<char>(kReadChunk);

  std::atomic<uint64_t> n_buffered{0};
  std::atomic<uint64_t> n_connections{0}, n_accepted{0}, n_requests{0}, n_refused{0}, n_timeouts{0},
      n_evicted{0}, n_tls_errors{0}, n_tls_reloads{0}, n_tls_reload_errors{0};

  // Tags of the two descriptors that are not connections, in epoll_event.data.ptr.
  char listen_tag = 0, wake_tag = 0;

  // Start()'s steps (defined beside it).
  Status SetUpTls();
  Status SetUpEpoll(const std::string& where);
  void SetLimits();

  // --- state, timers, lists ---------------------------------------------------------------------
  void Untime(Conn* c) {
    if (c->timed) timers.erase(c->timer);
    c->timed = false;
  }
  void Unlist(Conn* c) {
    if (c->list != nullptr) c->list->erase(c->where);
    c->list = nullptr;
  }
  // Moves `c` to `s`, with a deadline (none: Steady::time_point::max()) and at the back of `list`.
  void SetState(Conn* c, State s, Steady::time_point deadline, std::list<Conn*>* list) {
    c->state = s;
    Untime(c);
    if (deadline != Steady::time_point::max()) {
      c->timer = timers.emplace(deadline, c);
      c->timed = true;
    }
    if (list != c->list) {
      Unlist(c);
      if (list != nullptr) {
        list->push_back(c);
        c->where = std::prev(list->end());
        c->list = list;
      }
    }
  }
  void Recharge(Conn* c) {
    const size_t now = c->in.size() + c->body.size();
    buffered = buffered - c->charged + now;
    c->charged = now;
    n_buffered.store(buffered, std::memory_order_relaxed);
  }
  void Arm(Conn* c) {
    epoll_event e{};
    e.events = EPOLLONESHOT | (c->want == Io::kWantWrite ? EPOLLOUT : EPOLLIN);
    e.data.ptr = c;
    if (::epoll_ctl(epoll_fd.get(), c->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd.get(),
                    &e) != 0) {
      spdlog::warn("event=http_epoll_failed error={}", Value(std::strerror(errno)));
      Close(c);
      return;
    }
    c->registered = true;
  }
  void Close(Conn* c) {
    if (c->state == State::kDead) return;
    Untime(c);
    Unlist(c);
    if (c->ssl != nullptr) SSL_free(c->ssl);
    c->ssl = nullptr;
    // The accounting first: a client that sees the close also sees its bytes and connection
    // released in stats().
    buffered -= c->charged;
    n_buffered.store(buffered, std::memory_order_relaxed);
    c->charged = 0;
    n_connections.fetch_sub(1);
    c->fd.reset();  // also leaves the epoll set
    c->state = State::kDead;
    conns.erase(c);
    graveyard.push_back(c);
  }
  void ReleaseBuffers(Conn* c) {
    std::string().swap(c->body);
    c->chunked.reset();
    if (c->start >= c->in.size()) {
      c->in.Free();
      c->start = 0;
      c->scanned = 0;
    }
    Recharge(c);
  }
  void EnterIdle(Conn* c) {
    ReleaseBuffers(c);
    SetState(c, State::kIdle, Steady::now() + o->idle_timeout, &idle);
  }

  // --- reading and writing ------------------------------------------------------------------
  static Io Read(Conn* c, char* buf, size_t len, size_t* got) {
    *got = 0;
    if (c->ssl == nullptr) {
      for (;;) {
        const ssize_t n = ::recv(c->fd.get(), buf, len, 0);
        if (n > 0) {
          *got = static_cast<size_t>(n);
          return Io::kDone;
        }
        if (n == 0) return Io::kEof;
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? Io::kWantRead : Io::kError;
      }
    }
    ERR_clear_error();
    const int n = SSL_read(c->ssl, buf, static_cast<int>(std::min<size_t>(len, 1u << 30)));
    if (n > 0) {
      *got = static_cast<size_t>(n);
      return Io::kDone;
    }
    switch (SSL_get_error(c->ssl, n)) {
      case SSL_ERROR_WANT_READ:
        return Io::kWantRead;
      case SSL_ERROR_WANT_WRITE:
        return Io::kWantWrite;
      case SSL_ERROR_ZERO_RETURN:
        return Io::kEof;
      case SSL_ERROR_SYSCALL:
        return errno == 0 ? Io::kEof : Io::kError;
      default:
        return Io::kError;
    }
  }
  // Writes the pending output (serving threads call it too: it touches nothing but `c`).
  static Io Flush(Conn* c) {
    while (c->Pending() > 0) {
      const size_t h = c->out_head.size();
      if (c->ssl == nullptr) {
        iovec iov[2];
        int count = 0;
        if (c->out_off < h) iov[count++] = {c->out_head.data() + c->out_off, h - c->out_off};
        const size_t boff = c->out_off > h ? c->out_off - h : 0;
        if (boff < c->out_body.size())
          iov[count++] = {c->out_body.data() + boff, c->out_body.size() - boff};
        msghdr m{};
        m.msg_iov = iov;
        m.msg_iovlen = static_cast<size_t>(count);
        const ssize_t n = ::sendmsg(c->fd.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
          if (errno == EINTR) continue;
          return errno == EAGAIN || errno == EWOULDBLOCK ? Io::kWantWrite : Io::kError;
        }
        c->out_off += static_cast<size_t>(n);
        continue;
      }
      // TLS: one piece at a time (a record never spans the head and the body; that costs one
      // more record per reply, not a copy of the body).
      const char* p =
          c->out_off < h ? c->out_head.data() + c->out_off : c->out_body.data() + (c->out_off - h);
      const size_t len = c->out_off < h ? h - c->out_off : c->out_body.size() - (c->out_off - h);
      ERR_clear_error();
      const int n = SSL_write(c->ssl, p, static_cast<int>(std::min<size_t>(len, 1u << 30)));
      if (n > 0) {
        c->out_off += static_cast<size_t>(n);
        continue;
      }
      switch (SSL_get_error(c->ssl, n)) {
        case SSL_ERROR_WANT_READ:
          return Io::kWantRead;
        case SSL_ERROR_WANT_WRITE:
          return Io::kWantWrite;
        default:
          return Io::kError;
      }
    }
    return Io::kDone;
  }

  // Reads once into the connection's input: a Content-Length body straight to its place after
  // the head (at most its length, so nothing of a pipelined request is read with it), anything
  // else through the scratch buffer (only what arrived is kept).
  Io ReadSome(Conn* c, size_t* got) {
    if (c->state == State::kBody && c->chunked == nullptr) {
      const size_t old = c->in.size();
      const uint64_t remaining = c->body_length - (old - c->body_start);
      const size_t want = static_cast<size_t>(
          std::min<uint64_t>(remaining, std::max(kReadChunk, c->in.capacity() - old)));
      const Io r = Read(c, c->in.Extend(want), want, got);
      c->in.Commit(*got);
      return r;
    }
    if (c->start > 0) {
      c->in.EraseFront(c->start);  // (scanned counts from start: unchanged)
      c->start = 0;
    }
    const Io r = Read(c, scratch.data(), scratch.size(), got);
    c->in.append(scratch.data(), *got);
    return r;
  }

  // --- the HTTP layer's own answers -----------------------------------------------------------
  void Queue(Conn* c, int status, const std::string& why, After after) {
    Reply r = JsonReply(status, ErrorJson(why));
    c->out_head =
        http::ResponseHead(status, r.content_type, r.body.size(), true, {{"Date", DateValue()}});
    c->out_body = std::move(r.body);
    c->out_off = 0;
    c->after = after;
  }
  // Answers `status` with the reason and ends the connection after it (draining what the
  // client still sends when `drain`).
  void Refuse(Conn* c, int status, const std::string& why, bool drain) {
    n_refused.fetch_add(1);
    spdlog::warn("event=http_refused peer={} status={} error={}", Peer(c->fd.get()), status,
                 Value(why));
    c->in.Free();
    c->start = c->scanned = 0;
    ReleaseBuffers(c);
    Queue(c, status, why, drain ? After::kDrain : After::kClose);
    SetState(c, State::kWriting, Steady::now() + o->read_timeout, nullptr);
  }
  // Gives up the oldest idle connection, else the oldest one still sending a request (or in
  // its TLS handshake). False when every connection is busy or being answered.
  bool EvictOne(const char* why, const Conn* spare = nullptr) {
    Conn* victim = !idle.empty() ? idle.front() : nullptr;
    if (victim == nullptr)
      for (Conn* c : reading)
        if (c != spare) {
          victim = c;
          break;
        }
    if (victim == nullptr) return false;
    n_evicted.fetch_add(1);
    spdlog::info("event=http_evicted peer={} reason={} state={}", Peer(victim->fd.get()),
                 Value(why), victim->state == State::kIdle ? "idle" : "reading");
    Close(victim);
    return true;
  }
  // Keeps the request bytes held under max_buffered by giving up the oldest unfinished
  // requests; refuses `c` itself with 503 when nothing else can give way.
  void KeepWithinMemory(Conn* c) {
    while (buffered > max_buffered) {
      Conn* victim = nullptr;
      for (Conn* r : reading)
        if (r != c && r->charged > 0) {
          victim = r;
          break;
        }
      if (victim == nullptr) {
        Refuse(c, 503,
               "server busy: " + std::to_string(buffered) +
                   " bytes of requests already held (limit " + std::to_string(max_buffered) +
                   "); retry",
               false);
        return;
      }
      n_evicted.fetch_add(1);
      spdlog::info(
          "event=http_evicted peer={} reason=\"request bytes held over the limit\" bytes={}",
          Peer(victim->fd.get()), victim->charged);
      Close(victim);
    }
  }

  // --- the request state machine --------------------------------------------------------------
  // A complete request: the leader serves the first of a round itself and queues the others
  // for the followers (Lead()).
  void Dispatch(Conn* c) {
    n_requests.fetch_add(1);
    c->chunked.reset();
    SetState(c, State::kBusy, Steady::time_point::max(), nullptr);
    found.push_back(c);
  }
  // Advances a connection in kIdle, kHead or kBody over what is buffered. True when its state
  // changed (complete, refused, waiting to write "100 Continue"); false when it needs
  // more input.
  bool Parse(Conn* c) {
    if (c->state == State::kIdle) {
      if (c->start >= c->in.size()) return false;
      c->request_start = Steady::now();  // the next request has begun
      SetState(c, State::kHead, c->request_start + o->header_timeout, &reading);
    }
    if (c->state == State::kHead) {
      const std::string_view pending = c->in.view().substr(c->start);
      if (!MayEndHead(pending, &c->scanned) && pending.size() <= limits.max_head_bytes)
        return false;
      http::HeadResult h = http::ParseRequestHead(pending, limits);
      if (h.kind == http::HeadResult::Kind::kIncomplete) return false;  // leading blank lines only
      if (h.kind == http::HeadResult::Kind::kRefused) {
        Refuse(c, h.refusal.status, h.refusal.reason, false);
        return true;
      }
      c->start += h.consumed;
      c->scanned = 0;
      c->head = std::move(h.head);
      c->route = server->Find(c->head.path, &c->rest);
      c->body.clear();
      c->body_start = c->start;
      c->body_length = 0;
      if (!c->head.chunked && c->head.content_length > limits.max_body_bytes) {
        // The client sends the body unless it waits for "100 Continue".
        Refuse(c, 413, BodyTooLarge(limits.max_body_bytes), !c->head.expect_continue);
        return true;
      }
      if (!c->head.chunked && c->head.content_length == 0) {
        c->request_body = {};
        Dispatch(c);
        return true;
      }
      if (c->head.chunked) {
        c->chunked = std::make_unique<http::ChunkedDecoder>(limits.max_body_bytes);
      } else {
        // Room for the body as announced, up to kBodyReserve (memory is counted as it arrives;
        // a larger body grows as it comes).
        c->body_length = c->head.content_length;
        const size_t room =
            c->body_start + static_cast<size_t>(std::min<uint64_t>(c->body_length, kBodyReserve));
        if (c->in.capacity() < room) c->in.reserve(room);
      }
      SetState(c, State::kBody, c->request_start + o->read_timeout, &reading);
      if (c->head.expect_continue) {
        c->out_head = "HTTP/1.1 100 Continue\r\n\r\n";
        c->out_body.clear();
        c->out_off = 0;
        c->after = After::kBody;
        SetState(c, State::kWriting, c->request_start + o->read_timeout, &reading);
        return true;
      }
    }
    if (c->chunked != nullptr) {
      size_t used = 0;
      const http::ChunkedDecoder::State s =
          c->chunked->Feed(c->in.view().substr(c->start), &c->body, &used);
      c->start += used;
      if (s == http::ChunkedDecoder::State::kMore) return false;
      if (s == http::ChunkedDecoder::State::kError) {
        http::Refusal r = c->chunked->refusal();
        const bool too_large = r.status == 413;
        Refuse(c, r.status, too_large ? BodyTooLarge(limits.max_body_bytes) : r.reason, too_large);
        return true;
      }
      c->request_body = c->body;
      Dispatch(c);
      return true;
    }
    if (c->in.size() - c->body_start < c->body_length) return false;
    c->request_body = c->in.view().substr(c->body_start, static_cast<size_t>(c->body_length));
    c->start = c->body_start + static_cast<size_t>(c->body_length);  // pipelined bytes follow
    Dispatch(c);
    return true;
  }
  // The TLS handshake, after a look at the first bytes: a plain HTTP request to the TLS port is
  // answered in plain text, so that the client learns why.
  Io Handshake(Conn* c) {
    if (!c->peeked) {
      unsigned char first = 0;
      const ssize_t n = ::recv(c->fd.get(), &first, 1, MSG_PEEK);
      if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? Io::kWantRead
                                                                         : Io::kError;
      if (n == 0) return Io::kEof;
      c->peeked = true;
      if (first != 0x16) {  // not a TLS handshake record
        n_tls_errors.fetch_add(1);
        if (std::isupper(first) == 0) {
          spdlog::info("event=tls_handshake_failed peer={} error=\"not TLS\"", Peer(c->fd.get()));
          return Io::kError;
        }
        SSL_free(c->ssl);
        c->ssl = nullptr;
        Refuse(c, 400,
               "client sent an HTTP request to an HTTPS server (the extender's urlPrefix must "
               "start with https://)",
               true);
        return Io::kDone;
      }
    }
    ERR_clear_error();
    const int r = SSL_do_handshake(c->ssl);
    if (r == 1) return Io::kDone;
    const int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ) return Io::kWantRead;
    if (e == SSL_ERROR_WANT_WRITE) return Io::kWantWrite;
    n_tls_errors.fetch_add(1);
    std::string why = OpenSslErrors();
    const long verify = SSL_get_verify_result(c->ssl);
    if (verify != X509_V_OK)
      why += std::string(why.empty() ? "" : "; ") + X509_verify_cert_error_string(verify);
    if (why.empty())
      why = e == SSL_ERROR_SYSCALL ? "connection closed during the handshake" : "handshake failed";
    spdlog::info("event=tls_handshake_failed peer={} error={}", Peer(c->fd.get()), Value(why));
    return Io::kError;
  }
  // Moves `c` on as far as it can go without waiting, then arms it for what it waits for.
  void Pump(Conn* c) {
    size_t budget = kPumpBytes;
    for (;;) {
      switch (c->state) {
        case State::kDead:
        case State::kBusy:
          return;
        case State::kHandshake: {
          const Io r = Handshake(c);
          if (c->state == State::kWriting) continue;  // plain HTTP, answered
          if (r == Io::kDone) {
            EnterIdle(c);
            continue;
          }
          if (r == Io::kWantRead || r == Io::kWantWrite) {
            c->want = r;
            Arm(c);
          } else {
            Close(c);
          }
          return;
        }
        case State::kIdle:
        case State::kHead:
        case State::kBody: {
          if (Parse(c)) continue;
          if (budget == 0) {
            again.push_back(c);
            return;
          }
          size_t got = 0;
          const Io r = ReadSome(c, &got);
          if (got > 0) {
            budget -= std::min(budget, got);
            Recharge(c);
            KeepWithinMemory(c);
            continue;
          }
          if (r == Io::kWantRead || r == Io::kWantWrite) {
            c->want = r;
            Arm(c);
            return;
          }
          if (c->state != State::kIdle)
            spdlog::debug("event=http_closed_mid_request peer={} state={}", Peer(c->fd.get()),
                          c->state == State::kHead ? "head" : "body");
          Close(c);
          return;
        }
        case State::kWriting: {
          const Io r = Flush(c);
          if (r == Io::kWantRead || r == Io::kWantWrite) {
            c->want = r;
            Arm(c);
            return;
          }
          if (r != Io::kDone) {
            Close(c);
            return;
          }
          c->out_head.clear();
          std::string().swap(c->out_body);
          c->out_off = 0;
          switch (c->after) {
            case After::kNext:
              EnterIdle(c);
              continue;
            case After::kBody:
              SetState(c, State::kBody, c->request_start + o->read_timeout, &reading);
              continue;
            case After::kClose:
              if (c->ssl != nullptr) {
                ERR_clear_error();
                (void)SSL_shutdown(c->ssl);  // close_notify, best effort
              }
              Close(c);
              return;
            case After::kDrain:
              // Read and drop what the client still sends (bounded), so that it sees the
              // answer instead of a reset.
              if (c->ssl != nullptr) {
                ERR_clear_error();
                (void)SSL_shutdown(c->ssl);
              }
              ::shutdown(c->fd.get(), SHUT_WR);
              c->drained = 0;
              SetState(c, State::kDraining, Steady::now() + o->read_timeout, nullptr);
              continue;
          }
          return;
        }
        case State::kDraining: {
          const size_t bound = std::max<size_t>(64u << 20, 4 * o->max_body_bytes);
          for (;;) {
            const ssize_t n = ::recv(c->fd.get(), scratch.data(), scratch.size(), 0);
            if (n > 0) {
              c->drained += static_cast<size_t>(n);
              if (c->drained < bound) continue;
            } else if (n < 0 && errno == EINTR) {
              continue;
            } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
              c->want = Io::kWantRead;
              Arm(c);
              return;
            }
            Close(c);
            return;
          }
        }
      }
    }
  }

  // --- the loop -------------------------------------------------------------------------------
  void Accept() {
    for (int i = 0; i < kAcceptBurst; ++i) {
      UniqueFd fd(::accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE) {
          if (EvictOne("file descriptors exhausted")) continue;
          // Nothing to give up: take the connection with the spare descriptor and end it, so
          // that it does not sit in the backlog (and the listener does not stay readable).
          if (spare_fd) {
            spare_fd.reset();
            UniqueFd(::accept4(listen_fd.get(), nullptr, nullptr, SOCK_CLOEXEC))
                .reset();  // taken and ended
            spare_fd.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
          }
        }
        return;  // EAGAIN, or nothing more to do now
      }
      if (conns.size() >= max_connections && !EvictOne("connection limit")) {
        n_refused.fetch_add(1);
        if (!tls) {
          const std::string body = ErrorJson("too many connections, all busy; retry");
          const std::string head = http::ResponseHead(503, "application/json", body.size(), true);
          (void)::send(fd.get(), (head + body).data(), head.size() + body.size(),
                       MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        continue;  // (closes fd)
      }
      int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auto* c = new Conn;
      c->fd = std::move(fd);
      conns.insert(c);
      n_accepted.fetch_add(1);
      n_connections.fetch_add(1);
      if (tls) {
        c->ssl = SSL_new(tls->ctx());
        if (c->ssl == nullptr || SSL_set_fd(c->ssl, c->fd.get()) != 1) {
          spdlog::warn("event=tls_failed error={}", Value(OpenSslErrors()));
          Close(c);
          continue;
        }
        SSL_set_accept_state(c->ssl);
        SetState(c, State::kHandshake, Steady::now() + o->header_timeout, &reading);
      } else {
        SetState(c, State::kIdle, Steady::now() + o->idle_timeout, &idle);
      }
      c->want = Io::kWantRead;
      Arm(c);
    }
  }
  // Connections the serving threads are done with: finish their write (or close), then go on with
  // what they have buffered (pipelined requests).
  void TakeBack() {
    std::vector<Conn*> got;
    {
      MutexLock l(&back_mu);
      got.swap(back);
      wake_pending = false;
    }
    for (Conn* c : got) {
      while (c->rearming.load(std::memory_order_acquire)) std::this_thread::yield();
      std::string().swap(c->body);
      Recharge(c);
      if (c->want == Io::kError || c->want == Io::kEof || stopping.load()) {
        Close(c);
        continue;
      }
      if (c->rearmed) {  // reply written, socket armed by the serving thread: idle until it speaks
        c->rearmed = false;
        c->out_head.clear();
        std::string().swap(c->out_body);
        c->out_off = 0;
        EnterIdle(c);
        continue;
      }
      SetState(c, State::kWriting, Steady::now() + o->read_timeout, nullptr);
      Pump(c);
    }
  }
  void Expire(Steady::time_point now) {
    while (!timers.empty() && timers.begin()->first <= now) {
      Conn* c = timers.begin()->second;
      Untime(c);
      switch (c->state) {
        case State::kIdle:
          Close(c);
          break;
        case State::kHead:
          n_timeouts.fetch_add(1);
          Refuse(c, 408,
                 "request head not received within " + Seconds(o->header_timeout) +
                     " of its first byte (--http-read-header-timeout)",
                 false);
          Pump(c);
          break;
        case State::kBody:
          n_timeouts.fetch_add(1);
          Refuse(c, 408,
                 "request body not received within " + Seconds(o->read_timeout) +
                     " of the request's first byte (--http-read-timeout)",
                 false);
          Pump(c);
          break;
        default:  // a handshake, a reply or a drain that took too long
          n_timeouts.fetch_add(1);
          spdlog::debug("event=http_timeout peer={} state={}", Peer(c->fd.get()),
                        static_cast<int>(c->state));
          Close(c);
          break;
      }
    }
  }
  void CheckTls(Steady::time_point now) {
    if (!tls || now < next_tls_check) return;
    next_tls_check = now + kTlsCheckEvery;
    bool reloaded = false;
    const Status s = tls->ReloadIfChanged(&reloaded);
    if (!s.ok()) {
      n_tls_reload_errors.fetch_add(1);
      spdlog::warn(
          "event=tls_reload_failed error={} detail=\"the previous certificate stays in use\"",
          Value(s.message()));
    } else if (reloaded) {
      n_tls_reloads.fetch_add(1);
      spdlog::info("event=tls_reloaded cert={}", Value(tls->options().cert_file));
    }
  }
  // The leader's I/O loop: returns a complete request for the leader to serve (having queued
  // the others of the same round for the followers), or nullptr when the server stops.
  Conn* Lead() {
    while (!stopping.load()) {
      int timeout_ms = -1;
      const Steady::time_point now = Steady::now();
      Steady::time_point next = Steady::time_point::max();
      if (!timers.empty()) next = timers.begin()->first;
      if (tls) next = std::min(next, next_tls_check);
      if (!again.empty()) {
        timeout_ms = 0;
      } else if (next != Steady::time_point::max()) {
        const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
        timeout_ms = static_cast<int>(std::clamp<int64_t>(wait, 0, 60000));
      }
      const int n = ::epoll_wait(epoll_fd.get(), events.data(), kMaxEvents, timeout_ms);
      if (n < 0 && errno != EINTR) {
        spdlog::error("event=http_epoll_failed error={}", Value(std::strerror(errno)));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      // First what the threads handed back: a connection a thread re-armed may have an event
      // in this very batch.
      TakeBack();
      for (int i = 0; i < n; ++i) {
        void* p = events[static_cast<size_t>(i)].data.ptr;
        if (p == &listen_tag) {
          Accept();
        } else if (p == &wake_tag) {
          uint64_t v;
          (void)!::read(wake_fd.get(), &v, sizeof v);
          TakeBack();
        } else {
          Pump(static_cast<Conn*>(p));
        }
      }
      std::vector<Conn*> more;
      more.swap(again);
      for (Conn* c : more) Pump(c);
      Expire(Steady::now());
      CheckTls(Steady::now());
      for (Conn* c : graveyard) delete c;
      graveyard.clear();
      // Binds go to their own threads at once; the leader goes on leading.
      auto binds =
          std::stable_partition(found.begin(), found.end(), [](Conn* c) { return !OwnThread(c); });
      for (auto it = binds; it != found.end(); ++it) SubmitBind(*it);
      found.erase(binds, found.end());
      while (!found.empty()) {  // (serving one may complete the next, pipelined, request)
        // A quick request (the first of the round, if any) is served here and the leader goes
        // on leading; the others go to the followers. A request that may take long (a bind:
        // API calls) or has a large body is returned, so that a follower leads meanwhile.
        auto quick = std::find_if(found.begin(), found.end(), [](Conn* c) { return Quick(c); });
        Conn* mine = quick != found.end() ? *quick : found.front();
        if (found.size() > 1) {
          {
            MutexLock l(&mu);
            for (Conn* c : found)
              if (c != mine) ready.push_back(c);
          }
          cv.NotifyAll();
        }
        found.clear();
        if (!Quick(mine)) return mine;
        Respond(mine);
        SetState(mine, State::kWriting, Steady::now() + o->read_timeout, nullptr);
        Pump(mine);
      }
      for (Conn* c : graveyard) delete c;
      graveyard.clear();
    }
    return nullptr;
  }
  // Whether the leader serves `c`'s request itself without handing the lead on: a route on
  // Lane::kLeader (or none: a 404) with a body up to kQuickBodyBytes (filter and prioritize are
  // CPU-bound in their size: 0.2-1 ms at 5,000 nodes). Not: a bind (API calls, seconds at
  // worst), /metrics (its authorization may ask the API server; 12-15 ms of text at 1,000 nodes
  // x 8 GPUs), PREFIX/inspect and PREFIX/debug/cache (they grow with the cluster: 130-200 ms at
  // 1,000 nodes x 8 GPUs): those are on other lanes.
  static bool Quick(const Conn* c) {
    if (c->request_body.size() > kQuickBodyBytes) return false;
    return c->route == nullptr || c->route->lane == Lane::kLeader;
  }
  static bool OwnThread(const Conn* c) {
    return c->route != nullptr && c->route->lane == Lane::kOwnThread;
  }

  // Runs the handler of `c`'s request and puts the reply in its output.
  void Respond(Conn* c) {
    Reply r = server->Serve(c->head, c->route, c->rest, c->request_body);
    const bool keep = c->head.keep_alive && !r.close && !stopping.load();
    r.headers.emplace_back("Date", DateValue());
    c->out_head = http::ResponseHead(r.status, r.content_type, r.body.size(), !keep, r.headers);
    c->out_body = c->head.method == "HEAD" ? std::string() : std::move(r.body);
    c->out_off = 0;
    c->after = keep ? After::kNext : After::kClose;
  }

  // --- the threads: leader and followers ----------------------------------------------------
  // Every thread of the pool takes turns: one leads (runs the I/O loop above), the others wait
  // for a request or for the lead. A leader that finds a complete request hands the lead to a
  // follower and serves that request itself, so the request is not passed to another thread
  // (one wake-up per exchange, as with a thread blocked in recv(); a hand-off would add a
  // second, measured at +40 us per exchange on the 2-core benchmark machine). An idle or slow
  // connection still costs no thread: only complete requests are served.
  void Loop() GPUSHARE_EXCLUDES(mu) {
    BlockSigpipe();
    for (;;) {
      Conn* c = nullptr;
      bool lead = false;
      {
        MutexLock l(&mu);
        while (!stop_workers && ready.empty() && leading) cv.Wait(&mu);
        if (stop_workers) return;
        if (!ready.empty()) {
          c = ready.front();
          ready.pop_front();
        } else {
          leading = lead = true;
        }
      }
      if (lead) {
        c = Lead();
        {
          MutexLock l(&mu);
          leading = false;
        }
        cv.NotifyOne();  // a follower takes the lead
      }
      if (c == nullptr) continue;
      if (OwnThread(c)) {
        SubmitBind(c);
      } else {
        Serve(c);
      }
    }
  }

  void SubmitBind(Conn* c) GPUSHARE_EXCLUDES(bind_mu) {
    {
      MutexLock l(&bind_mu);
      bind_queue.push_back(c);
      if (bind_idle == 0 && bind_live < std::max(1, o->bind_threads)) {
        ++bind_live;
        std::thread([this] { BindLoop(); }).detach();
      }
    }
    bind_cv.NotifyOne();
  }
  // A bind thread serves binds until it has been idle for o->bind_thread_idle (or the server
  // stops), then ends: threads follow the binds in flight, up to o->bind_threads.
  void BindLoop() GPUSHARE_EXCLUDES(bind_mu) {
    BlockSigpipe();
    for (;;) {
      Conn* c = nullptr;
      {
        MutexLock l(&bind_mu);
        bool idle_too_long = false;
        while (!bind_stop && bind_queue.empty() && !idle_too_long) {
          ++bind_idle;
          idle_too_long = !bind_cv.WaitFor(&bind_mu, o->bind_thread_idle);
          --bind_idle;
        }
        if (bind_stop || bind_queue.empty()) {
          --bind_live;
          bind_cv.NotifyAll();  // (Stop waits for the last one; nothing is touched after this)
          return;
        }
        c = bind_queue.front();
        bind_queue.pop_front();
      }
      const uint64_t now = n_binds.fetch_add(1) + 1;
      uint64_t peak = n_binds_peak.load();
      while (now > peak && !n_binds_peak.compare_exchange_weak(peak, now)) {
      }
      Serve(c);
      n_binds.fetch_sub(1);
    }
  }
  // After the pool: binds already running finish; those queued are dropped with their
  // connections (Stop closes every connection).
  void StopBinds() GPUSHARE_EXCLUDES(bind_mu) {
    MutexLock l(&bind_mu);
    bind_stop = true;
    bind_queue.clear();
    bind_cv.NotifyAll();
    while (bind_live > 0) bind_cv.Wait(&bind_mu);
  }

  // Runs the handler of `c`'s request and writes the reply (non-blocking; what the socket does
  // not take is finished by the leader).
  void Serve(Conn* c) {
    Respond(c);
    c->want = Flush(c);
    // The usual case, a reply written whole on a connection that stays open with nothing
    // more buffered: this thread re-arms the socket itself and does not wake the leader,
    // which takes the connection back when it next wakes, at the latest for the client's
    // next request. Otherwise the leader is woken to finish the write or close.
    const bool quiet = c->want == Io::kDone && c->after == After::kNext &&
                       c->start >= c->in.size() && !stopping.load();
    const int fd = c->fd.get();
    c->rearmed = quiet;
    if (quiet) c->rearming.store(true, std::memory_order_relaxed);
    bool wake = false;
    {
      MutexLock l(&back_mu);
      back.push_back(c);  // before the re-arm: an event for `fd` finds it in `back`
      if (!quiet && !wake_pending) wake = wake_pending = true;
    }
    if (quiet) {
      epoll_event e{};
      e.events = EPOLLIN | EPOLLONESHOT;
      e.data.ptr = c;
      if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_MOD, fd, &e) != 0)
        wake = true;  // (the leader re-arms it)
      c->rearming.store(false, std::memory_order_release);
    }
    if (wake) {
      const uint64_t one = 1;
      (void)!::write(wake_fd.get(), &one, sizeof one);
    }
  }
};

HttpServer::HttpServer(HttpServerOptions options, std::vector<Route> routes)
    : options_(std::move(options)), routes_(std::move(routes)) {
  for (const Route& r : routes_)
    served_ += (served_.empty() ? "" : ", ") + r.path + (r.subtree ? "[/...]" : "");
}

HttpServer::~HttpServer() {
  Stop();
}

HttpServerStats HttpServer::stats() const {
  HttpServerStats s;
  if (!impl_) return s;
  const Impl& im = *impl_;
  s.connections = im.n_connections.load();
  s.buffered_bytes = im.n_buffered.load();
  s.accepted = im.n_accepted.load();
  s.requests = im.n_requests.load();
  s.refused = im.n_refused.load();
  s.timeouts = im.n_timeouts.load();
  s.evicted = im.n_evicted.load();
  s.tls_handshake_errors = im.n_tls_errors.load();
  s.binds_in_flight = im.n_binds.load();
  s.binds_in_flight_peak = im.n_binds_peak.load();
  {
    MutexLock l(&impl_->bind_mu);
    s.bind_threads = static_cast<uint64_t>(impl_->bind_live);
  }
  s.tls_reloads = im.n_tls_reloads.load();
  s.tls_reload_errors = im.n_tls_reload_errors.load();
  return s;
}

namespace {

// A listening socket on the first of host:port's addresses that takes one.
Result<UniqueFd> Listen(const std::string& host, int port, const std::string& where) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc =
          ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
      rc != 0)
    return Status::Unavailable("cannot listen on " + where + ": " + gai_strerror(rc));
  std::string error = "no address";
  UniqueFd listening;
  for (addrinfo* a = res; a != nullptr && !listening; a = a->ai_next) {
    UniqueFd fd(
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!fd) {
      error = std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd.get(), SOMAXCONN) == 0) {
      listening = std::move(fd);
    } else {
      error = std::strerror(errno);
    }
  }
  ::freeaddrinfo(res);
  if (!listening) return Status::Unavailable("cannot listen on " + where + ": " + error);
  return listening;
}

// The port a socket is bound to.
int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  return ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

}  // namespace

// The TLS context, when the options ask for one.
Status HttpServer::Impl::SetUpTls() {
  if (!o->tls.enabled()) return Status::Ok();
  GPUSHARE_ASSIGN_OR_RETURN(tls, TlsServerContext::Load(o->tls));
  next_tls_check = Steady::now() + kTlsCheckEvery;
  return Status::Ok();
}

// The epoll set (the listener and the wake-up eventfd in it) and the spare descriptor.
Status HttpServer::Impl::SetUpEpoll(const std::string& where) {
  epoll_fd.reset(::epoll_create1(EPOLL_CLOEXEC));
  wake_fd.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  spare_fd.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!epoll_fd || !wake_fd)
    return Status::Unavailable("cannot serve on " + where + ": " + std::strerror(errno));
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.ptr = &listen_tag;
  ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, listen_fd.get(), &e);
  e.data.ptr = &wake_tag;
  ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, wake_fd.get(), &e);
  return Status::Ok();
}

// max_connections and max_buffered: as configured, else from RLIMIT_NOFILE and the body limit.
void HttpServer::Impl::SetLimits() {
  rlimit fds{};
  ::getrlimit(RLIMIT_NOFILE, &fds);
  const rlim_t soft = fds.rlim_cur == RLIM_INFINITY ? rlim_t{1} << 20 : fds.rlim_cur;
  max_connections =
      o->max_connections > 0
          ? static_cast<size_t>(o->max_connections)
          : static_cast<size_t>(std::max<rlim_t>(16, soft > kFdReserve ? soft - kFdReserve : 0));
  max_buffered = o->max_buffered_bytes > 0 ? o->max_buffered_bytes
                                           : std::max<size_t>(64u << 20, 4 * o->max_body_bytes);
}

Status HttpServer::Start() {
  if (impl_) return Status::FailedPrecondition("HTTP server already started");
  auto impl = std::make_unique<Impl>();  // (its descriptors close if a step below fails)
  impl->server = this;
  impl->o = &options_;
  impl->limits.max_body_bytes = options_.max_body_bytes;
  impl->limits.max_head_bytes = options_.max_head_bytes;
  const std::string where = options_.host + ":" + std::to_string(options_.port);
  GPUSHARE_RETURN_IF_ERROR(impl->SetUpTls());
  GPUSHARE_ASSIGN_OR_RETURN(impl->listen_fd, Listen(options_.host, options_.port, where));
  port_ = BoundPort(impl->listen_fd.get());
  GPUSHARE_RETURN_IF_ERROR(impl->SetUpEpoll(where));
  impl->SetLimits();
  impl_ = std::move(impl);
  Impl* im = impl_.get();
  // At least two: one leads while another serves.
  for (int i = 0; i < std::max(2, options_.threads); ++i)
    im->threads.emplace_back([im] { im->Loop(); });
  return Status::Ok();
}

void HttpServer::Stop() {
  if (!impl_) return;
  Impl* im = impl_.get();
  {
    MutexLock l(&im->mu);
    im->stop_workers = true;
  }
  im->stopping.store(true);
  const uint64_t one = 1;
  (void)!::write(im->wake_fd.get(), &one, sizeof one);  // the leader leaves epoll_wait
  im->cv.NotifyAll();
  for (std::thread& t : im->threads)
    if (t.joinable()) t.join();  // (a handler that is running finishes first)
  im->StopBinds();
  // Every connection is this thread's now.
  for (Conn* c : im->conns) {
    if (c->ssl != nullptr) SSL_free(c->ssl);
    delete c;  // (closes its socket)
  }
  im->conns.clear();
  impl_.reset();  // (closes the listener, epoll, eventfd and spare descriptors)
}

const Route* HttpServer::Find(std::string_view path, std::string_view* rest) const {
  for (const Route& r : routes_) {
    if (path.substr(0, r.path.size()) != r.path) continue;
    const std::string_view after = path.substr(r.path.size());
    if (after.empty() || (r.subtree && after.front() == '/')) {
      if (rest != nullptr) *rest = after;
      return &r;
    }
  }
  return nullptr;
}

Reply HttpServer::Serve(const http::RequestHead& head, const Route* route, std::string_view rest,
                        std::string_view body) {
  if (route == nullptr) {
    const std::string why =
        "no endpoint " + head.method + " " + head.path + " (served: " + served_ + ")";
    spdlog::warn("event=http_refused method={} path={} status=404 error={}", Value(head.method),
                 Value(head.path), Value(why));
    return JsonReply(404, ErrorJson(why));
  }
  const bool get = route->method == "GET";
  if (head.method != route->method && !(get && head.method == "HEAD")) {
    Reply r = JsonReply(405, ErrorJson(head.method + " " + head.path + ": takes " + route->method));
    r.headers.emplace_back("Allow", get ? "GET, HEAD" : route->method);
    return r;
  }
  try {
    return route->handle(Request{head, body, rest});
  } catch (const std::exception& e) {
    spdlog::error("event=handler_exception path={} error={}", Value(head.path), Value(e.what()));
    return JsonReply(500, ErrorJson(std::string("internal error: ") + e.what()));
  } catch (...) {
    return JsonReply(500, ErrorJson("internal error"));
  }
}

}  // namespace gpushare::net
