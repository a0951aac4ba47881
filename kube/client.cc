#include "kube/client.h"

#include <curl/curl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <mutex>
#include <thread>

#include "kube/errors.h"
#include "kube/http_mux.h"

namespace gpushare::kube {
namespace {

using nlohmann::json;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool IsUnreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

std::string Query(std::initializer_list<std::pair<std::string_view, std::string>> params) {
  std::string q;
  for (const auto& [k, v] : params) {
    if (v.empty()) continue;
    q += q.empty() ? '?' : '&';
    q += k;
    q += '=';
    q += UrlEncode(v);
  }
  return q;
}

Status TransportError(CURLcode code, const char* errbuf, std::chrono::milliseconds timeout) {
  std::string detail = errbuf[0] != '\0' ? std::string(errbuf) : curl_easy_strerror(code);
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return Status::DeadlineExceeded("request timed out after " + std::to_string(timeout.count()) +
                                      " ms: " + detail);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CONNECT_ERROR:
      return Status::Unavailable("TLS: " + detail);
    default:
      return Status::Unavailable("transport: " + detail);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Helpers

std::string UrlEncode(std::string_view s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (IsUnreserved(c)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string ResourcePath(ResourceRef r, std::string_view ns, std::string_view name,
                         std::string_view subresource) {
  std::string p = r.group_version == "v1" ? "/api/v1" : "/apis/" + std::string(r.group_version);
  if (r.namespaced && !ns.empty()) {
    p += "/namespaces/";
    p += UrlEncode(ns);
  }
  p += '/';
  p += r.resource;
  if (!name.empty()) {
    p += '/';
    p += UrlEncode(name);
    if (!subresource.empty()) {
      p += '/';
      p += subresource;
    }
  }
  return p;
}

json AnnotationsPatch(const AnnotationChanges& changes) {
  json ann = json::object();
  for (const auto& [k, v] : changes) {
    if (v) {
      ann[k] = *v;
    } else {
      ann[k] = nullptr;
    }
  }
  return json{{"metadata", {{"annotations", std::move(ann)}}}};
}

std::string_view WatchEventTypeName(WatchEventType t) {
  switch (t) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
    case WatchEventType::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

// ---------------------------------------------------------------------------------------------
// Cancellation

void Cancellation::Cancel() {
  MutexLock lock(&mu_);
  cancelled_.store(true, std::memory_order_release);
  for (void* m : active_) curl_multi_wakeup(static_cast<CURLM*>(m));
  cv_.NotifyAll();
}

bool Cancellation::SleepFor(std::chrono::nanoseconds d) const {
  MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + d;
  while (!cancelled()) {
    if (!cv_.WaitUntil(&mu_, deadline)) break;
  }
  return !cancelled();
}

void Cancellation::Register(void* multi) const {
  MutexLock lock(&mu_);
  active_.insert(multi);
}

void Cancellation::Unregister(void* multi) const {
  MutexLock lock(&mu_);
  auto it = active_.find(multi);  // one registration: requests in flight may share a handle
  if (it != active_.end()) active_.erase(it);
}

// ---------------------------------------------------------------------------------------------
// Client internals

struct Client::Conn {
  CURL* easy = nullptr;
  CURLM* multi = nullptr;
  ~Conn() {
    if (easy != nullptr) curl_easy_cleanup(easy);
    if (multi != nullptr) curl_multi_cleanup(multi);
  }
};

namespace detail {

// The cluster CA and the client certificate and key, parsed once: curl builds a new OpenSSL
// context for every connection and would parse the PEM blobs into each (with OpenSSL 3's
// decoders, a large part of a new connection's CPU; bench/scheduler/kube_client_bench.cc).
// SslCtx() hands every new context these objects, reference counted and only read there.
struct TlsIdentity {
  X509_STORE* store = nullptr;  // the cluster CA; null: the system trust store (curl's)
  X509* cert = nullptr;         // the client certificate, null without one
  std::vector<X509*> chain;     // certificates after it in the PEM (intermediates)
  EVP_PKEY* key = nullptr;
  ~TlsIdentity() {
    X509_STORE_free(store);
    X509_free(cert);
    for (X509* c : chain) X509_free(c);
    EVP_PKEY_free(key);
  }

  // Null when a blob does not parse: then curl is given the blobs as before, and reports the
  // problem on the first connection as it always did.
  static std::shared_ptr<const TlsIdentity> Parse(const ClientConfig& c) {
    auto id = std::make_shared<TlsIdentity>();
    if (!c.ca_pem.empty()) {
      std::vector<X509*> cas = Certificates(c.ca_pem);
      if (cas.empty()) return nullptr;
      id->store = X509_STORE_new();
      bool ok = id->store != nullptr;
      for (X509* x : cas) {
        ok = ok && X509_STORE_add_cert(id->store, x) == 1;
        X509_free(x);
      }
      if (!ok) return nullptr;
    }
    if (!c.client_cert_pem.empty()) {
      std::vector<X509*> certs = Certificates(c.client_cert_pem);
      if (certs.empty()) return nullptr;
      id->cert = certs.front();
      id->chain.assign(certs.begin() + 1, certs.end());
      BIO* bio =
          BIO_new_mem_buf(c.client_key_pem.data(), static_cast<int>(c.client_key_pem.size()));
      id->key = bio != nullptr ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr) : nullptr;
      BIO_free(bio);
      if (id->key == nullptr || X509_check_private_key(id->cert, id->key) != 1) {
        ERR_clear_error();
        return nullptr;
      }
    }
    ERR_clear_error();
    return id;
  }
  static std::vector<X509*> Certificates(const std::string& pem) {
    std::vector<X509*> out;
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    if (bio == nullptr) return out;
    while (X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) out.push_back(x);
    BIO_free(bio);
    ERR_clear_error();  // the end of the data reads as an error
    return out;
  }
  // CURLOPT_SSL_CTX_FUNCTION: called with each new connection's context.
  static CURLcode SslCtx(CURL*, void* ssl_ctx, void* self) {
    const auto* id = static_cast<const TlsIdentity*>(self);
    SSL_CTX* ctx = static_cast<SSL_CTX*>(ssl_ctx);
    if (id->store != nullptr) SSL_CTX_set1_cert_store(ctx, id->store);
    if (id->cert != nullptr) {
      if (SSL_CTX_use_certificate(ctx, id->cert) != 1 || SSL_CTX_use_PrivateKey(ctx, id->key) != 1)
        return CURLE_SSL_CERTPROBLEM;
      for (X509* c : id->chain)
        if (SSL_CTX_add1_chain_cert(ctx, c) != 1) return CURLE_SSL_CERTPROBLEM;
    }
    return CURLE_OK;
  }
};

}  // namespace detail

// The parsed server URL; with tls-server-name set, requests go to https://<server-name>:port
// and CONNECT_TO sends them to the real host, so SNI and verification use the server name.
struct Client::Target {
  std::string base;        // what request paths are appended to
  std::string connect_to;  // CURLOPT_CONNECT_TO entry, or empty
};

Client::Client(ClientConfig config, ClientOptions options)
    : config_(std::move(config)),
      options_(std::move(options)),
      limiter_(options_.qps, options_.burst, options_.clock) {}

Client::~Client() {
  for (Conn* c : idle_) delete c;
}

Result<std::shared_ptr<Client>> Client::Create(ClientConfig config, ClientOptions options) {
  GlobalInit();
  std::shared_ptr<Client> c(new Client(std::move(config), std::move(options)));
  GPUSHARE_RETURN_IF_ERROR(c->Init());
  if (c->options_.share_connections)
    c->mux_ = std::make_unique<detail::HttpMux>(c->options_.max_idle_connections);
  return c;
}

Status Client::Init() {
  const std::string& s = config_.server;
  bool https = s.rfind("https://", 0) == 0;
  if (!https && s.rfind("http://", 0) != 0) {
    return Status::InvalidArgument("server: must start with https:// or http://, got \"" + s +
                                   "\"");
  }
  size_t host_start = https ? 8 : 7;
  size_t path_start = s.find('/', host_start);
  if (path_start != std::string::npos && path_start + 1 < s.size()) {
    return Status::InvalidArgument("server: a path prefix is not supported, got \"" + s + "\"");
  }
  std::string hostport = s.substr(
      host_start, path_start == std::string::npos ? std::string::npos : path_start - host_start);
  if (hostport.empty()) return Status::InvalidArgument("server: no host in \"" + s + "\"");
  std::string host = hostport, port = https ? "443" : "80";
  size_t colon = hostport.rfind(':');
  size_t bracket = hostport.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    host = hostport.substr(0, colon);
    port = hostport.substr(colon + 1);
  }
  target_ = std::make_unique<Target>();
  if (https) {
    std::shared_ptr<const detail::TlsIdentity> id = detail::TlsIdentity::Parse(config_);
    if (id != nullptr && (id->store != nullptr || id->cert != nullptr)) tls_ = std::move(id);
  }
  if (!config_.tls_server_name.empty() && https) {
    target_->base = "https://" + config_.tls_server_name + ":" + port;
    std::string h = host;
    if (!h.empty() && h.front() == '[') h = h.substr(1, h.size() - 2);
    target_->connect_to = config_.tls_server_name + ":" + port + ":" + h + ":" + port;
  } else {
    target_->base = "http" + std::string(https ? "s" : "") + "://" + hostport;
  }
  if (!config_.token_file.empty()) {
    token_ = BearerToken::FromFile(config_.token_file);
    Result<std::string> t = token_->Get();
    if (!t.ok()) return t.status();
  } else if (!config_.token.empty()) {
    token_ = BearerToken::Fixed(config_.token);
  }
  return Status::Ok();
}

ClientStats Client::stats() const {
  return {.requests = requests_.load(),
          .throttled = throttled_.load(),
          .throttle_wait_ns = throttle_wait_ns_.load(),
          .token_reloads = token_reloads_.load(),
          .watch_events = watch_events_.load(),
          .connections = connections_.load()};
}

Client::Conn* Client::Acquire() {
  {
    MutexLock lock(&pool_mu_);
    if (!idle_.empty()) {
      Conn* c = idle_.back();
      idle_.pop_back();
      return c;
    }
  }
  auto* c = new Conn();
  c->easy = curl_easy_init();
  c->multi = curl_multi_init();
  return c;
}

void Client::Release(Conn* c) {
  MutexLock lock(&pool_mu_);
  if (idle_.size() < options_.max_idle_connections) {
    idle_.push_back(c);
  } else {
    delete c;
  }
}

Status Client::Throttle(const Cancellation* cancel) {
  std::chrono::nanoseconds wait = limiter_.Reserve();
  if (wait.count() <= 0) return Status::Ok();
  throttled_.fetch_add(1);
  throttle_wait_ns_.fetch_add(static_cast<uint64_t>(wait.count()));
  if (options_.sleep_for) {
    options_.sleep_for(wait);
  } else if (cancel != nullptr) {
    if (!cancel->SleepFor(wait)) return Status::Unavailable("request cancelled");
  } else {
    std::this_thread::sleep_for(wait);
  }
  return Status::Ok();
}

namespace {

struct TransferState {
  std::string body;
  size_t limit = 0;
  bool too_large = false;
  CURL* easy = nullptr;
  const std::function<bool(long, std::string_view)>* on_data = nullptr;
  bool stopped = false;  // on_data asked to stop
};

size_t WriteCallback(char* ptr, size_t size, size_t nmemb, void* userdata) {
  auto* st = static_cast<TransferState*>(userdata);
  size_t n = size * nmemb;
  if (st->on_data != nullptr) {
    long code = 0;
    curl_easy_getinfo(st->easy, CURLINFO_RESPONSE_CODE, &code);
    if (!(*st->on_data)(code, std::string_view(ptr, n))) {
      st->stopped = true;
      return 0;
    }
    return n;
  }
  if (st->body.size() + n > st->limit) {
    st->too_large = true;
    return 0;
  }
  st->body.append(ptr, n);
  return n;
}

// One HTTP exchange on a pooled connection: builds the request on its easy handle, runs the
// transfer and judges the outcome. Owns what the handle points into until the transfer is over.
class Exchange {
 public:
  Exchange(const ClientConfig& config, const ClientOptions& options, std::string url,
           const std::function<bool(long, std::string_view)>* on_data,
           const detail::TlsIdentity* tls)
      : config_(config), options_(options), url_(std::move(url)), tls_(tls) {
    st_.limit = options_.max_response_bytes;
    st_.on_data = on_data;
  }
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;
  ~Exchange() { FreeLists(); }

  // Builds the request on `h` and runs it on `m` until it is done, fails or `cancel` fires (the
  // caller registers `m` with it).
  void Send(CURL* h, CURLM* m, const HttpRequest& request, const std::string& token,
            const std::string& connect_to, const Cancellation* cancel,
            std::chrono::milliseconds timeout) {
    Prepare(h, request, token, connect_to, timeout);
    curl_multi_add_handle(m, h);
    Transfer(m, cancel);
    Collect(h);
    curl_multi_remove_handle(m, h);
    FreeLists();
  }
  // The same on the client's shared multi handle (HttpMux), whose thread runs the transfer.
  void SendVia(detail::HttpMux* mux, CURL* h, const HttpRequest& request, const std::string& token,
               const std::string& connect_to, const Cancellation* cancel,
               std::chrono::milliseconds timeout) {
    Prepare(h, request, token, connect_to, timeout);
    result_ = mux->Run(h, cancel, &cancelled_);
    Collect(h);
    FreeLists();
  }
  // New connections the exchange opened (0 on a reused one).
  long connections() const { return connects_; }
  // Why the exchange has no response to decode, if it has none.
  Status Outcome(const HttpRequest& request, std::chrono::milliseconds timeout) const {
    if (cancelled_) return Status::Unavailable("request cancelled");
    if (st_.too_large) {
      return Status::ResourceExhausted("response to " + request.method + " " +
                                       request.path_and_query + " is larger than " +
                                       std::to_string(options_.max_response_bytes) + " bytes");
    }
    if (result_ != CURLE_OK && !(result_ == CURLE_WRITE_ERROR && st_.stopped)) {
      return TransportError(result_, errbuf_, timeout).WithContext(request.method + " " + url_);
    }
    return Status::Ok();
  }
  long code() const { return code_; }
  HttpResponse TakeResponse() {
    HttpResponse resp;
    resp.code = code_;
    resp.body = std::move(st_.body);
    return resp;
  }

 private:
  void Prepare(CURL* h, const HttpRequest& request, const std::string& token,
               const std::string& connect_to, std::chrono::milliseconds timeout) {
    curl_easy_reset(h);
    SetTransport(h, connect_to, timeout);
    SetRequest(h, request, token);
    st_.easy = h;
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, WriteCallback);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &st_);
  }
  void Collect(CURL* h) {
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code_);
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects_);
  }

  // --- request build: where to, with which limits, over which TLS; then method, headers, body
  void SetTransport(CURL* h, const std::string& connect_to, std::chrono::milliseconds timeout) {
    curl_easy_setopt(h, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf_);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, options_.user_agent.c_str());
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options_.connect_timeout.count()));
    if (timeout.count() > 0)
      curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    // HTTP/2 where TLS negotiates it (kube-apiserver does), HTTP/1.1 otherwise.
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    if (!connect_to.empty()) {
      connect_to_ = curl_slist_append(nullptr, connect_to.c_str());
      curl_easy_setopt(h, CURLOPT_CONNECT_TO, connect_to_);
    }
    SetTls(h);
  }
  void SetTls(CURL* h) {
    if (config_.insecure_skip_tls_verify) {
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (tls_ != nullptr) {  // parsed once: each new connection's context gets the objects
      curl_easy_setopt(h, CURLOPT_SSL_CTX_FUNCTION, &detail::TlsIdentity::SslCtx);
      curl_easy_setopt(h, CURLOPT_SSL_CTX_DATA, const_cast<detail::TlsIdentity*>(tls_));
      if (tls_->store != nullptr && !config_.insecure_skip_tls_verify) {
        // Only the cluster CA: curl loads no bundle of its own.
        curl_easy_setopt(h, CURLOPT_CAINFO, nullptr);
        curl_easy_setopt(h, CURLOPT_CAPATH, nullptr);
      }
      return;
    }
    if (!config_.insecure_skip_tls_verify && !config_.ca_pem.empty()) {
      curl_blob blob{const_cast<char*>(config_.ca_pem.data()), config_.ca_pem.size(),
                     CURL_BLOB_NOCOPY};
      curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
      curl_easy_setopt(h, CURLOPT_CAPATH, nullptr);
    }
    if (config_.client_cert_pem.empty()) return;
    curl_blob cert{const_cast<char*>(config_.client_cert_pem.data()),
                   config_.client_cert_pem.size(), CURL_BLOB_NOCOPY};
    curl_blob key{const_cast<char*>(config_.client_key_pem.data()), config_.client_key_pem.size(),
                  CURL_BLOB_NOCOPY};
    curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
  }
  void SetRequest(CURL* h, const HttpRequest& request, const std::string& token) {
    headers_ = curl_slist_append(headers_, "Accept: application/json");
    headers_ = curl_slist_append(headers_, "Expect:");
    if (!token.empty()) {
      auth_ = "Authorization: Bearer " + token;
      headers_ = curl_slist_append(headers_, auth_.c_str());
    }
    if (!request.content_type.empty()) {
      ctype_ = "Content-Type: " + request.content_type;
      headers_ = curl_slist_append(headers_, ctype_.c_str());
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers_);
    if (request.method == "GET") {
      curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
      return;
    }
    if (request.method != "POST")
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    if (!request.body.empty() || request.method == "POST") {
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
    }
  }

  // --- send ------------------------------------------------------------------------------------
  void Transfer(CURLM* m, const Cancellation* cancel) {
    auto cancelled = [cancel] { return cancel != nullptr && cancel->cancelled(); };
    for (;;) {
      int running = 0;
      if (curl_multi_perform(m, &running) != CURLM_OK) {
        result_ = CURLE_RECV_ERROR;
        return;
      }
      if (running == 0) {
        int queued = 0;
        while (CURLMsg* msg = curl_multi_info_read(m, &queued)) {
          if (msg->msg == CURLMSG_DONE) result_ = msg->data.result;
        }
        return;
      }
      if (cancelled()) break;
      curl_multi_poll(m, nullptr, 0, 1000, nullptr);
      if (cancelled()) break;
    }
    cancelled_ = true;
  }
  void FreeLists() {
    curl_slist_free_all(headers_);
    curl_slist_free_all(connect_to_);
    headers_ = connect_to_ = nullptr;
  }

  const ClientConfig& config_;
  const ClientOptions& options_;
  const std::string url_;
  const detail::TlsIdentity* tls_;
  char errbuf_[CURL_ERROR_SIZE] = "";
  std::string auth_, ctype_;
  curl_slist* headers_ = nullptr;
  curl_slist* connect_to_ = nullptr;
  TransferState st_;
  long code_ = 0;  // the HTTP status
  long connects_ = 0;
  CURLcode result_ = CURLE_OK;
  bool cancelled_ = false;
};

}  // namespace

// --- retry -------------------------------------------------------------------------------------
bool Client::ReloadToken(std::string* token) {
  if (!token_ || !token_->file_backed()) return false;
  Result<bool> changed = token_->Reload();
  if (!changed.ok() || !*changed) return false;
  Result<std::string> t = token_->Get();
  if (!t.ok()) return false;
  *token = *t;
  token_reloads_.fetch_add(1);
  return true;
}

Result<HttpResponse> Client::Perform(const HttpRequest& request, const Cancellation* cancel,
                                     std::chrono::milliseconds timeout,
                                     const std::function<bool(long, std::string_view)>* on_data) {
  if (cancel != nullptr && cancel->cancelled()) return Status::Unavailable("request cancelled");
  GPUSHARE_RETURN_IF_ERROR(Throttle(cancel));
  std::string token;
  if (token_) {
    GPUSHARE_ASSIGN_OR_RETURN(token, token_->Get());
  }
  for (int attempt = 0;; ++attempt) {
    Exchange x(config_, options_, target_->base + request.path_and_query, on_data, tls_.get());
    Conn* conn = Acquire();
    requests_.fetch_add(1);
    // Unary requests share the client's connections (HttpMux); a watch streams into its
    // handler on a connection of its own for as long as it lasts.
    detail::HttpMux* mux = on_data == nullptr ? mux_.get() : nullptr;
    void* wake = mux != nullptr ? mux->wake_handle() : conn->multi;
    if (cancel != nullptr) cancel->Register(wake);
    if (mux != nullptr) {
      x.SendVia(mux, conn->easy, request, token, target_->connect_to, cancel, timeout);
    } else {
      x.Send(conn->easy, conn->multi, request, token, target_->connect_to, cancel, timeout);
    }
    if (cancel != nullptr) cancel->Unregister(wake);
    connections_.fetch_add(static_cast<uint64_t>(x.connections()));
    Release(conn);
    GPUSHARE_RETURN_IF_ERROR(x.Outcome(request, timeout));
    // A 401 with a token file: the token may have rotated under the same mtime; re-read once.
    if (x.code() == 401 && attempt == 0 && on_data == nullptr && ReloadToken(&token)) continue;
    return x.TakeResponse();
  }
}

Result<HttpResponse> Client::Do(const HttpRequest& request, const Cancellation* cancel) {
  return Perform(request, cancel, options_.request_timeout, nullptr);
}

Result<json> Client::JsonCall(const HttpRequest& request, const Cancellation* cancel) {
  GPUSHARE_ASSIGN_OR_RETURN(const HttpResponse r, Do(request, cancel));
  if (r.code < 200 || r.code > 299) {
    return StatusFromHttp(r.code, r.body)
        .WithContext(request.method + " " + request.path_and_query);
  }
  if (r.body.empty()) return json(nullptr);
  json j = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Status::Internal(request.method + " " + request.path_and_query +
                            ": the API server sent malformed JSON (" +
                            std::to_string(r.body.size()) + " bytes)");
  }
  return j;
}

// ---------------------------------------------------------------------------------------------
// Generic calls

Result<json> Client::Get(ResourceRef r, std::string_view ns, std::string_view name,
                         std::string_view subresource) {
  if (name.empty())
    return Status::InvalidArgument("get " + std::string(r.resource) + ": empty name");
  return JsonCall({"GET", ResourcePath(r, ns, name, subresource), "", ""});
}

Result<json> Client::ListPage(ResourceRef r, std::string_view ns, const ListOptions& o,
                              const Cancellation* cancel) {
  std::string q = Query({{"labelSelector", o.label_selector},
                         {"fieldSelector", o.field_selector},
                         {"resourceVersion", o.resource_version},
                         {"resourceVersionMatch", o.resource_version_match},
                         {"limit", o.limit > 0 ? std::to_string(o.limit) : ""},
                         {"continue", o.continue_token}});
  return JsonCall({"GET", ResourcePath(r, ns) + q, "", ""}, cancel);
}

Result<RawList> Client::List(ResourceRef r, std::string_view ns, const ListOptions& options,
                             const Cancellation* cancel) {
  ListOptions page = options;
  page.continue_token.clear();
  RawList out;
  bool restarted = false;
  std::set<std::string> seen_tokens;
  for (;;) {
    Result<json> j = ListPage(r, ns, page, cancel);
    if (!j.ok()) {
      if (IsExpired(j.status()) && !page.continue_token.empty() && !restarted) {
        // The snapshot the pages came from is gone: start again, in one piece.
        restarted = true;
        page = options;
        page.limit = 0;
        page.continue_token.clear();
        out = RawList();
        continue;
      }
      return j.status();
    }
    if (!j->is_object())
      return Status::Internal("list " + std::string(r.resource) + ": reply is not an object");
    const json& items = (*j)["items"];
    if (!items.is_null() && !items.is_array()) {
      return Status::Internal("list " + std::string(r.resource) + ": items is not an array");
    }
    if (items.is_array()) {
      for (const json& item : items) out.items.push_back(item);
    }
    std::string cont;
    const json& meta = (*j)["metadata"];
    if (meta.is_object()) {
      if (out.resource_version.empty() || page.continue_token.empty()) {
        out.resource_version = meta.value("resourceVersion", "");
      }
      cont = meta.value("continue", "");
    }
    if (cont.empty()) break;
    if (!seen_tokens.insert(cont).second) {
      return Status::Internal("list " + std::string(r.resource) +
                              ": the server repeated a continue token");
    }
    page.continue_token = cont;
  }
  return out;
}

Status Client::Watch(ResourceRef r, std::string_view ns, const WatchOptions& o,
                     const WatchHandler& handler, const Cancellation* cancel) {
  std::string q =
      Query({{"watch", "true"},
             {"labelSelector", o.label_selector},
             {"fieldSelector", o.field_selector},
             {"resourceVersion", o.resource_version},
             {"allowWatchBookmarks", o.allow_bookmarks ? "true" : ""},
             {"timeoutSeconds", o.timeout_seconds > 0 ? std::to_string(o.timeout_seconds) : ""}});
  HttpRequest req{"GET", ResourcePath(r, ns) + q, "", ""};

  std::string buffer;      // the incomplete event line
  std::string error_body;  // body of a non-200 reply
  Status stream_error;
  size_t max_line = options_.max_watch_event_bytes;
  auto dispatch = [&](std::string_view line) -> bool {
    size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string_view::npos) return true;  // blank line
    json ev = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (ev.is_discarded() || !ev.is_object() || !ev.contains("type") || !ev["type"].is_string()) {
      stream_error =
          Status::Unavailable("watch " + std::string(r.resource) + ": malformed event (" +
                              std::to_string(line.size()) + " bytes)");
      return false;
    }
    std::string type = ev["type"].get<std::string>();
    WatchEvent e;
    if (type == "ADDED") {
      e.type = WatchEventType::kAdded;
    } else if (type == "MODIFIED") {
      e.type = WatchEventType::kModified;
    } else if (type == "DELETED") {
      e.type = WatchEventType::kDeleted;
    } else if (type == "BOOKMARK") {
      e.type = WatchEventType::kBookmark;
    } else if (type == "ERROR") {
      e.type = WatchEventType::kError;
    } else {
      stream_error = Status::Unavailable("watch " + std::string(r.resource) +
                                         ": unknown event type \"" + type + "\"");
      return false;
    }
    auto obj = ev.find("object");
    if (obj == ev.end() || !obj->is_object()) {
      stream_error = Status::Unavailable("watch " + std::string(r.resource) + ": " + type +
                                         " event without an object");
      return false;
    }
    e.object = std::move(*obj);
    watch_events_.fetch_add(1);
    return handler(std::move(e));
  };
  bool handler_stopped = false;
  std::function<bool(long, std::string_view)> on_data = [&](long code, std::string_view chunk) {
    if (code != 200) {
      if (error_body.size() < 65536) error_body.append(chunk.substr(0, 65536 - error_body.size()));
      return true;
    }
    size_t start = 0;
    while (start < chunk.size()) {
      size_t nl = chunk.find('\n', start);
      size_t piece = (nl == std::string_view::npos ? chunk.size() : nl) - start;
      if (buffer.size() + piece > max_line) {
        stream_error =
            Status::ResourceExhausted("watch " + std::string(r.resource) + ": event larger than " +
                                      std::to_string(max_line) + " bytes");
        return false;
      }
      if (nl == std::string_view::npos) {
        buffer.append(chunk.substr(start));
        break;
      }
      bool more;
      if (buffer.empty()) {
        more = dispatch(chunk.substr(start, nl - start));
      } else {
        buffer.append(chunk.substr(start, nl - start));
        more = dispatch(buffer);
        buffer.clear();
      }
      if (!more) {
        if (stream_error.ok()) handler_stopped = true;
        return false;
      }
      start = nl + 1;
    }
    return true;
  };
  std::chrono::milliseconds timeout(0);
  if (o.timeout_seconds > 0) timeout = std::chrono::seconds(o.timeout_seconds + 30);
  Result<HttpResponse> resp = Perform(req, cancel, timeout, &on_data);
  if (!stream_error.ok()) return stream_error;
  if (handler_stopped) return Status::Ok();
  if (!resp.ok()) return resp.status().WithContext("watch " + std::string(r.resource));
  if (resp->code != 200) {
    return StatusFromHttp(resp->code, error_body).WithContext("watch " + std::string(r.resource));
  }
  if (!buffer.empty()) {
    // The server closes after a complete event; a partial one means the stream was cut.
    if (!dispatch(buffer) && !stream_error.ok()) return stream_error;
  }
  return Status::Ok();
}

Result<json> Client::Create(ResourceRef r, std::string_view ns, const json& body) {
  return JsonCall({"POST", ResourcePath(r, ns), body.dump(), "application/json"});
}

Result<json> Client::MergePatch(ResourceRef r, std::string_view ns, std::string_view name,
                                json patch, const PatchOptions& options) {
  if (name.empty())
    return Status::InvalidArgument("patch " + std::string(r.resource) + ": empty name");
  if (!patch.is_object())
    return Status::InvalidArgument("patch " + std::string(r.resource) +
                                   ": patch must be an object");
  if (!options.resource_version.empty()) {
    patch["metadata"]["resourceVersion"] = options.resource_version;
  }
  if (!options.uid.empty()) patch["metadata"]["uid"] = options.uid;
  return JsonCall({"PATCH", ResourcePath(r, ns, name, options.subresource), patch.dump(),
                   "application/merge-patch+json"});
}

Result<json> Client::Update(ResourceRef r, std::string_view ns, std::string_view name,
                            const json& object) {
  if (name.empty())
    return Status::InvalidArgument("update " + std::string(r.resource) + ": empty name");
  if (!object.is_object())
    return Status::InvalidArgument("update " + std::string(r.resource) +
                                   ": the object must be an object");
  return JsonCall({"PUT", ResourcePath(r, ns, name), object.dump(), "application/json"});
}

Result<json> Client::JsonPatch(ResourceRef r, std::string_view ns, std::string_view name,
                               const json& ops) {
  if (name.empty())
    return Status::InvalidArgument("patch " + std::string(r.resource) + ": empty name");
  if (!ops.is_array())
    return Status::InvalidArgument("patch " + std::string(r.resource) +
                                   ": a JSON patch is an array");
  return JsonCall({"PATCH", ResourcePath(r, ns, name), ops.dump(), "application/json-patch+json"});
}

Status Client::Delete(ResourceRef r, std::string_view ns, std::string_view name,
                      const DeleteOptions& options) {
  if (name.empty())
    return Status::InvalidArgument("delete " + std::string(r.resource) + ": empty name");
  json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (options.grace_period_seconds) body["gracePeriodSeconds"] = *options.grace_period_seconds;
  if (!options.uid_precondition.empty())
    body["preconditions"] = {{"uid", options.uid_precondition}};
  Result<json> j = JsonCall({"DELETE", ResourcePath(r, ns, name), body.dump(), "application/json"});
  return j.status();
}

// ---------------------------------------------------------------------------------------------
// Typed calls

namespace {

template <typename T, typename Decoder>
Result<T> DecodeResult(Result<json> j, Decoder decode) {
  if (!j.ok()) return j.status();
  return decode(*j);
}

template <typename T, typename Decoder>
Result<std::vector<T>> DecodeItems(Result<RawList> list, Decoder decode) {
  if (!list.ok()) return list.status();
  std::vector<T> out;
  out.reserve(list->items.size());
  for (const json& item : list->items) {
    GPUSHARE_ASSIGN_OR_RETURN(T v, decode(item));
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace

Result<Pod> Client::GetPod(std::string_view ns, std::string_view name) {
  return DecodeResult<Pod>(Get(kPods, ns, name), DecodePod);
}

Result<Node> Client::GetNode(std::string_view name) {
  return DecodeResult<Node>(Get(kNodes, "", name), DecodeNode);
}

Result<std::vector<Pod>> Client::ListPods(std::string_view ns, const ListOptions& options) {
  return DecodeItems<Pod>(List(kPods, ns, options), DecodePod);
}

Result<std::vector<Node>> Client::ListNodes(const ListOptions& options) {
  return DecodeItems<Node>(List(kNodes, "", options), DecodeNode);
}

Result<Pod> Client::PatchPodAnnotations(std::string_view ns, std::string_view name,
                                        const AnnotationChanges& changes,
                                        const PatchOptions& options) {
  return DecodeResult<Pod>(MergePatch(kPods, ns, name, AnnotationsPatch(changes), options),
                           DecodePod);
}

Result<Pod> Client::PatchPodStatus(std::string_view ns, std::string_view name,
                                   const json& status_patch, const PatchOptions& options) {
  PatchOptions o = options;
  o.subresource = "status";
  return DecodeResult<Pod>(MergePatch(kPods, ns, name, json{{"status", status_patch}}, o),
                           DecodePod);
}

Result<Node> Client::PatchNodeAnnotations(std::string_view name, const AnnotationChanges& changes,
                                          const PatchOptions& options) {
  return DecodeResult<Node>(MergePatch(kNodes, "", name, AnnotationsPatch(changes), options),
                            DecodeNode);
}

Result<Node> Client::PatchNodeStatus(std::string_view name, const json& status_patch,
                                     const PatchOptions& options) {
  PatchOptions o = options;
  o.subresource = "status";
  return DecodeResult<Node>(MergePatch(kNodes, "", name, json{{"status", status_patch}}, o),
                            DecodeNode);
}

Status Client::Bind(const Binding& b) {
  if (b.pod_name.empty() || b.pod_namespace.empty() || b.node_name.empty()) {
    return Status::InvalidArgument("bind: pod name, namespace and node name are required");
  }
  Result<json> j = JsonCall({"POST", ResourcePath(kPods, b.pod_namespace, b.pod_name, "binding"),
                             EncodeBinding(b).dump(), "application/json"});
  return j.status();
}

Result<Event> Client::CreateEvent(const Event& e) {
  if (e.metadata.namespace_.empty()) return Status::InvalidArgument("event: namespace is required");
  return DecodeResult<Event>(Create(kEvents, e.metadata.namespace_, EncodeEvent(e)), DecodeEvent);
}

}  // namespace gpushare::kube
