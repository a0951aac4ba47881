// TLS for net/'s HTTP server (OpenSSL), as the extender's listener needs it: the server side
// of kube-scheduler's extender `enableHTTPS` / `tlsConfig`
// (../shared/reference/kubernetes-protocols.md §3.3).
//
//   --tls-cert-file          the serving certificate, PEM, leaf first then intermediates
//   --tls-private-key-file   its private key, PEM
//   --client-ca-file         optional: PEM CA bundle; when given, every client must present a
//                            certificate signed by one of these CAs (mutual TLS), which is what
//                            kube-scheduler's tlsConfig.certFile/keyFile (or certData/keyData)
//                            send
//
// TLS 1.2 and 1.3 only; TLS 1.2 with ECDHE and AEAD ciphers only; no renegotiation, no
// compression; ALPN answers "http/1.1" when offered (kube-scheduler's Go transport also offers
// h2, which this server does not speak). The files are re-read when one of them changes on disk
// (ReloadIfChanged, called about once a second by the server): a rotated certificate is used for
// new connections without a restart, and a rotation that does not load (a key that does not
// match its certificate, a half-written file) keeps the previous context and says why.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace gpushare::net {

struct TlsOptions {
  std::string cert_file;       // --tls-cert-file; empty: plain HTTP
  std::string key_file;        // --tls-private-key-file
  std::string client_ca_file;  // --client-ca-file; empty: no client certificate asked for
  // How the flags are named in errors: "--" + "tls-cert-file" (the webhook's: "--webhook-").
  std::string flag_prefix = "--";

  bool enabled() const { return !cert_file.empty(); }
};

// A flag-level check (before anything starts): both files or neither, the CA only with them.
Status ValidateTlsOptions(const TlsOptions& options);

class TlsServerContext {
 public:
  // Loads the files; the error names the flag and the file.
  static Result<std::unique_ptr<TlsServerContext>> Load(const TlsOptions& options);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  // The context for new connections. Each SSL made from it holds its own reference, so a
  // reload never pulls a context from under a connection.
  SSL_CTX* ctx() const { return ctx_; }
  const TlsOptions& options() const { return options_; }
  // Re-reads the files when one of them changed on disk (device, inode, size, modification or
  // change time) since the last attempt. Ok with *reloaded set when a new context is in use;
  // an error when the new files do not load (the old context stays; the same files are not
  // tried again until they change once more).
  Status ReloadIfChanged(bool* reloaded);

 private:
  explicit TlsServerContext(TlsOptions options) : options_(std::move(options)) {}
  std::vector<std::string> Signature() const;

  TlsOptions options_;
  SSL_CTX* ctx_ = nullptr;
  std::vector<std::string> signature_;  // of the files at the last load attempt
};

// The text of the OpenSSL errors queued on this thread (and clears them), "" when none.
std::string OpenSslErrors();

}  // namespace gpushare::net
