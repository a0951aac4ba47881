#include "net/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace gpushare::net {
namespace {

// TLS 1.2: forward secrecy and AEAD only (TLS 1.3's suites are all of that kind already).
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// ALPN: HTTP/1.1 when the client offers it; otherwise no protocol is selected (the client then
// speaks HTTP/1.1 by default).
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
               unsigned int inlen, void*) {
  static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kHttp11, sizeof kHttp11, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK;
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

// "" when `path` is a regular file we can stat, else why not.
std::string FileProblem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  return "";
}

class CtxOwner {
 public:
  explicit CtxOwner(SSL_CTX* c) : c_(c) {}
  ~CtxOwner() {
    if (c_ != nullptr) SSL_CTX_free(c_);
  }
  SSL_CTX* get() const { return c_; }
  SSL_CTX* release() {
    SSL_CTX* c = c_;
    c_ = nullptr;
    return c;
  }

 private:
  SSL_CTX* c_;
};

Result<SSL_CTX*> BuildContext(const TlsOptions& o) {
  ERR_clear_error();
  CtxOwner ctx(SSL_CTX_new(TLS_server_method()));
  if (ctx.get() == nullptr) return Status::Internal("SSL_CTX_new: " + OpenSslErrors());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(
      ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_set_cipher_list(ctx.get(), kTls12Ciphers) != 1)
    return Status::Internal("TLS cipher list: " + OpenSslErrors());
  // Partial writes with a buffer that may move (the server retries from an offset), and no
  // per-connection buffers kept while a connection idles.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                  SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_alpn_select_cb(ctx.get(), SelectAlpn, nullptr);
  auto file_error = [&o](const std::string& flag, const std::string& path, const std::string& why) {
    return Status::InvalidArgument(o.flag_prefix + flag.substr(2) + " " + path + ": " + why);
  };
  if (std::string p = FileProblem(o.cert_file); !p.empty())
    return file_error("--tls-cert-file", o.cert_file, p);
  if (std::string p = FileProblem(o.key_file); !p.empty())
    return file_error("--tls-private-key-file", o.key_file, p);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), o.cert_file.c_str()) != 1)
    return file_error("--tls-cert-file", o.cert_file,
                      "not a PEM certificate (" + OpenSslErrors() + ")");
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    const unsigned long e = ERR_peek_last_error();
    if (ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH) {
      ERR_clear_error();
      return file_error("--tls-private-key-file", o.key_file,
                        "does not match the certificate in " + o.cert_file);
    }
    return file_error("--tls-private-key-file", o.key_file,
                      "not a PEM private key (" + OpenSslErrors() + ")");
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1)
    return file_error("--tls-private-key-file", o.key_file,
                      "does not match the certificate in " + o.cert_file);
  if (!o.client_ca_file.empty()) {
    if (std::string p = FileProblem(o.client_ca_file); !p.empty())
      return file_error("--client-ca-file", o.client_ca_file, p);
    if (SSL_CTX_load_verify_locations(ctx.get(), o.client_ca_file.c_str(), nullptr) != 1)
      return file_error("--client-ca-file", o.client_ca_file,
                        "not a PEM CA bundle (" + OpenSslErrors() + ")");
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.client_ca_file.c_str());
    if (names == nullptr || sk_X509_NAME_num(names) == 0) {
      if (names != nullptr) sk_X509_NAME_pop_free(names, X509_NAME_free);
      return file_error("--client-ca-file", o.client_ca_file, "holds no CA certificate");
    }
    SSL_CTX_set_client_CA_list(ctx.get(), names);  // takes ownership
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  ERR_clear_error();
  return ctx.release();
}

}  // namespace

std::string OpenSslErrors() {
  std::string out;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

Status ValidateTlsOptions(const TlsOptions& o) {
  if (o.cert_file.empty() != o.key_file.empty())
    return Status::InvalidArgument(o.cert_file.empty()
                                       ? "--tls-private-key-file: given without --tls-cert-file"
                                       : "--tls-cert-file: given without --tls-private-key-file");
  if (!o.client_ca_file.empty() && o.cert_file.empty())
    return Status::InvalidArgument(
        "--client-ca-file: needs --tls-cert-file and --tls-private-key-file (mutual TLS)");
  return Status::Ok();
}

Result<std::unique_ptr<TlsServerContext>> TlsServerContext::Load(const TlsOptions& options) {
  GPUSHARE_RETURN_IF_ERROR(ValidateTlsOptions(options));
  std::unique_ptr<TlsServerContext> t(new TlsServerContext(options));
  t->signature_ = t->Signature();
  GPUSHARE_ASSIGN_OR_RETURN(SSL_CTX * ctx, BuildContext(options));
  t->ctx_ = ctx;
  return t;
}

TlsServerContext::~TlsServerContext() {
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

std::vector<std::string> TlsServerContext::Signature() const {
  std::vector<std::string> out;
  for (const std::string* f : {&options_.cert_file, &options_.key_file, &options_.client_ca_file}) {
    struct stat st {};
    if (f->empty() || ::stat(f->c_str(), &st) != 0) {
      out.emplace_back();
      continue;
    }
    out.push_back(std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
                  std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
                  std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ctim.tv_sec) +
                  "." + std::to_string(st.st_ctim.tv_nsec));
  }
  return out;
}

Status TlsServerContext::ReloadIfChanged(bool* reloaded) {
  *reloaded = false;
  std::vector<std::string> now = Signature();
  if (now == signature_) return Status::Ok();
  signature_ = std::move(now);
  GPUSHARE_ASSIGN_OR_RETURN(SSL_CTX * ctx, BuildContext(options_));
  SSL_CTX_free(ctx_);
  ctx_ = ctx;
  *reloaded = true;
  return Status::Ok();
}

}  // namespace gpushare::net
