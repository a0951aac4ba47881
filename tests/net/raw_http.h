// A raw HTTP/1.1 client connection for tests of net/'s server (net/http_server.h): it sends exactly
// the bytes under test (plain, or inside TLS after StartTls) and reads Content-Length framed
// responses. Used by the server's tests, the node's metrics listener's and the extender's soak
// test.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>
#include <string_view>

namespace gpushare::net::testing {

// Raises this process's soft RLIMIT_NOFILE to the hard limit (for tests that open many
// sockets); returns the soft limit now.
inline rlim_t RaiseFdLimit() {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
  ::getrlimit(RLIMIT_NOFILE, &r);
  return r.rlim_cur;
}

// How a test's TLS client connects.
struct TlsClientOptions {
  std::string ca_file;  // verify the server's chain and name against it; empty: no verification
  std::string cert_file, key_file;  // a client certificate (mutual TLS); empty: none
  std::string server_name =
      "127.0.0.1";      // the name (or IP) checked against the server's certificate
  int max_version = 0;  // e.g. TLS1_1_VERSION, to offer only an old protocol
};

class Raw {
 public:
  // `rcvbuf` > 0: a small receive buffer (set before connecting, so the window stays small).
  explicit Raw(int port, int rcvbuf = 0) {
    // OpenSSL writes with write(2): a peer that closed must not kill the test with SIGPIPE.
    static const bool sigpipe_ignored = [] { return std::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();
    (void)sigpipe_ignored;
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Raw() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    ::close(fd_);
  }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;
  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  // The TLS handshake (blocking, at most 5 s); "" on success, else OpenSSL's words.
  std::string StartTls(const TlsClientOptions& o) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (o.max_version != 0) {
      SSL_CTX_set_min_proto_version(ctx_, 0);
      SSL_CTX_set_security_level(ctx_, 0);  // let the test offer what the server must refuse
      SSL_CTX_set_max_proto_version(ctx_, o.max_version);
    }
    if (!o.ca_file.empty()) {
      if (SSL_CTX_load_verify_locations(ctx_, o.ca_file.c_str(), nullptr) != 1)
        return "CA: " + Errors();
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    }
    if (!o.cert_file.empty()) {
      if (SSL_CTX_use_certificate_chain_file(ctx_, o.cert_file.c_str()) != 1 ||
          SSL_CTX_use_PrivateKey_file(ctx_, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
        return "client certificate: " + Errors();
    }
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    in6_addr ip6;
    in_addr ip4;
    const bool ip = ::inet_pton(AF_INET, o.server_name.c_str(), &ip4) == 1 ||
                    ::inet_pton(AF_INET6, o.server_name.c_str(), &ip6) == 1;
    if (ip) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), o.server_name.c_str());
    } else {
      SSL_set_tlsext_host_name(ssl_, o.server_name.c_str());
      SSL_set1_host(ssl_, o.server_name.c_str());
    }
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    ERR_clear_error();
    if (SSL_connect(ssl_) != 1) {
      std::string why = Errors();
      return why.empty() ? "handshake failed" : why;
    }
    return "";
  }

  bool Send(std::string_view s) {
    while (!s.empty()) {
      ssize_t n;
      if (ssl_ != nullptr) {
        n = SSL_write(ssl_, s.data(), static_cast<int>(s.size()));
      } else {
        n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      }
      if (n <= 0) return false;
      s.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  struct Response {
    int status = 0;  // 0: none (closed or timed out)
    std::string head;
    std::string body;
  };
  // Reads one response (Content-Length framed); HEAD responses have no body.
  Response Read(bool head_only = false, int timeout_ms = 5000) {
    Response r;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos)
      if (!Fill(timeout_ms)) return r;
    r.head = buf_.substr(0, end + 2);
    r.status = std::atoi(r.head.c_str() + 9);
    size_t length = 0;
    const size_t cl = r.head.find("Content-Length: ");
    if (cl != std::string::npos && !head_only && r.status != 100)
      length = std::strtoull(r.head.c_str() + cl + 16, nullptr, 10);
    while (buf_.size() < end + 4 + length)
      if (!Fill(timeout_ms)) return Response{};
    r.body = buf_.substr(end + 4, length);
    buf_.erase(0, end + 4 + length);
    return r;
  }
  // True when the server closed the connection (EOF, a reset, or a TLS alert) within the timeout.
  bool Closed(int timeout_ms = 5000) {
    Got g;
    while ((g = Receive(timeout_ms)) == Got::kData) {
    }
    return g == Got::kClosed;
  }

 private:
  enum class Got { kData, kClosed, kTimeout };
  static std::string Errors() {
    std::string out;
    for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
      char b[256];
      ERR_error_string_n(e, b, sizeof b);
      out += (out.empty() ? "" : "; ") + std::string(b);
    }
    return out;
  }
  // Appends what arrives within the timeout to buf_.
  Got Receive(int timeout_ms) {
    if (ssl_ == nullptr || SSL_pending(ssl_) == 0) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) return Got::kTimeout;
    }
    char c[65536];
    const ssize_t n = ssl_ != nullptr ? SSL_read(ssl_, c, sizeof c) : ::recv(fd_, c, sizeof c, 0);
    if (n <= 0) return Got::kClosed;
    buf_.append(c, static_cast<size_t>(n));
    return Got::kData;
  }
  bool Fill(int timeout_ms) { return Receive(timeout_ms) == Got::kData; }
  int fd_ = -1;
  bool connected_ = false;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  std::string buf_;
};

}  // namespace gpushare::net::testing
