// Client's transport: see client.h. The connection pool, the HTTP/2 mux, the bearer token and
// its reloads, the client-side throttle, one exchange (Exchange) and its retries (Perform, Do).
#include <curl/curl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <mutex>
#include <thread>

#include "kube/client.h"
#include "kube/errors.h"
#include "kube/http_mux.h"

namespace gpushare::kube {
namespace {

using nlohmann::json;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
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

}  // namespace gpushare::kube
