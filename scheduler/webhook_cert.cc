#include "scheduler/webhook_cert.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <ctime>
#include <memory>
#include <set>

#include "net/tls.h"

namespace gpushare::scheduler {

namespace {

struct Free {
  void operator()(X509* p) const { X509_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(GENERAL_NAMES* p) const { GENERAL_NAMES_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
};
using X509Ptr = std::unique_ptr<X509, Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Free>;
using BioPtr = std::unique_ptr<BIO, Free>;

std::vector<X509Ptr> ReadCerts(const std::string& pem) {
  std::vector<X509Ptr> out;
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return out;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) out.emplace_back(x);
  ERR_clear_error();  // (the end of the input reads as an error)
  return out;
}

KeyPtr ReadKey(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  KeyPtr k(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  ERR_clear_error();
  return k;
}

std::string CertPem(X509* x) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), x);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string KeyPem(EVP_PKEY* k) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), k, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

int64_t Seconds(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

CertInfo Info(X509* x) {
  CertInfo i;
  i.not_before = Seconds(X509_get0_notBefore(x));
  i.not_after = Seconds(X509_get0_notAfter(x));
  std::unique_ptr<GENERAL_NAMES, Free> names(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(x, NID_subject_alt_name, nullptr, nullptr)));
  if (names) {
    for (int k = 0; k < sk_GENERAL_NAME_num(names.get()); ++k) {
      const GENERAL_NAME* n = sk_GENERAL_NAME_value(names.get(), k);
      if (n->type != GEN_DNS) continue;
      const ASN1_IA5STRING* s = n->d.dNSName;
      i.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                               static_cast<size_t>(ASN1_STRING_length(s)));
    }
  }
  return i;
}

// A CA certificate of `bundle` whose public key is `key`'s, or nullptr.
X509* MatchingCa(const std::vector<X509Ptr>& bundle, EVP_PKEY* key) {
  for (const X509Ptr& x : bundle)
    if (X509_check_ca(x.get()) > 0 && X509_check_private_key(x.get(), key) == 1) return x.get();
  ERR_clear_error();
  return nullptr;
}

std::string Hours(int64_t s) {
  return std::to_string(s / 3600) + "h";
}

Status Failed(const std::string& what) {
  return Status::Internal("webhook certificate: " + what + ": " + net::OpenSslErrors());
}

Result<KeyPtr> NewKey() {
  KeyPtr k(EVP_EC_gen("P-256"));
  if (!k) return Failed("generating an ECDSA P-256 key");
  return k;
}

Status AddExtension(X509* subject, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, subject, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return Failed(std::string("extension ") + OBJ_nid2sn(nid) + "=" + value);
  const int ok = X509_add_ext(subject, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return Failed(std::string("adding extension ") + OBJ_nid2sn(nid));
  return Status::Ok();
}

// A certificate for `key` named `cn`, signed by `issuer_key` (issuer: nullptr = self-signed).
Result<X509Ptr> NewCert(EVP_PKEY* key, const std::string& cn, X509* issuer, EVP_PKEY* issuer_key,
                        int64_t not_before, int64_t not_after, bool ca,
                        const std::vector<std::string>& dns_names) {
  X509Ptr x(X509_new());
  if (!x) return Failed("X509_new");
  X509_set_version(x.get(), 2);  // v3
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return Failed("random serial number");
  serial[0] &= 0x7f;  // positive
  std::unique_ptr<BIGNUM, Free> bn(BN_bin2bn(serial, sizeof serial, nullptr));
  if (!bn || BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(x.get())) == nullptr)
    return Failed("serial number");
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name);
  if (ASN1_TIME_set(X509_getm_notBefore(x.get()), static_cast<time_t>(not_before)) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(x.get()), static_cast<time_t>(not_after)) == nullptr)
    return Failed("validity");
  if (X509_set_pubkey(x.get(), key) != 1) return Failed("public key");
  X509* iss = issuer != nullptr ? issuer : x.get();
  if (ca) {
    GPUSHARE_RETURN_IF_ERROR(
        AddExtension(x.get(), iss, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
    GPUSHARE_RETURN_IF_ERROR(
        AddExtension(x.get(), iss, NID_key_usage, "critical,keyCertSign,cRLSign"));
    GPUSHARE_RETURN_IF_ERROR(AddExtension(x.get(), iss, NID_subject_key_identifier, "hash"));
  } else {
    GPUSHARE_RETURN_IF_ERROR(
        AddExtension(x.get(), iss, NID_basic_constraints, "critical,CA:FALSE"));
    GPUSHARE_RETURN_IF_ERROR(
        AddExtension(x.get(), iss, NID_key_usage, "critical,digitalSignature"));
    GPUSHARE_RETURN_IF_ERROR(AddExtension(x.get(), iss, NID_ext_key_usage, "serverAuth"));
    GPUSHARE_RETURN_IF_ERROR(
        AddExtension(x.get(), iss, NID_authority_key_identifier, "keyid:always"));
    std::string san;
    for (const std::string& d : dns_names) san += (san.empty() ? "DNS:" : ",DNS:") + d;
    if (!san.empty())
      GPUSHARE_RETURN_IF_ERROR(AddExtension(x.get(), iss, NID_subject_alt_name, san.c_str()));
  }
  if (X509_sign(x.get(), issuer_key, EVP_sha256()) == 0) return Failed("signing");
  return x;
}

}  // namespace

std::string_view CertActionName(CertAction a) {
  switch (a) {
    case CertAction::kKeep:
      return "keep";
    case CertAction::kNewLeaf:
      return "new_leaf";
    case CertAction::kNewCa:
      return "new_ca";
    case CertAction::kPruneBundle:
      return "prune_bundle";
  }
  return "?";
}

std::vector<std::string> ServiceDnsNames(const std::string& name, const std::string& ns) {
  return {name, name + "." + ns, name + "." + ns + ".svc", name + "." + ns + ".svc.cluster.local"};
}

CertDecision DecideCert(const CertFacts& f, const std::vector<std::string>& dns_names, int64_t now,
                        const CertPolicy& p) {
  if (!f.present) return {CertAction::kNewCa, "the Secret does not exist"};
  if (!f.ca_usable) return {CertAction::kNewCa, "the CA is unusable: " + f.ca_problem};
  if (f.ca.not_after - now < p.ca_renew_before_s)
    return {CertAction::kNewCa, "the CA expires in " + Hours(f.ca.not_after - now) +
                                    ", less than " + Hours(p.ca_renew_before_s)};
  if (f.ca.not_before > now)
    return {CertAction::kNewCa, "the CA is not valid yet (a clock moved back?)"};
  if (!f.leaf_usable)
    return {CertAction::kNewLeaf, "the serving certificate is unusable: " + f.leaf_problem};
  if (std::set<std::string>(f.leaf.dns_names.begin(), f.leaf.dns_names.end()) !=
      std::set<std::string>(dns_names.begin(), dns_names.end()))
    return {CertAction::kNewLeaf, "the serving certificate's DNS names differ from the Service's"};
  if (f.leaf.not_before > now)
    return {CertAction::kNewLeaf, "the serving certificate is not valid yet"};
  const int64_t life = f.leaf.not_after - f.leaf.not_before;
  if (3 * (f.leaf.not_after - now) < life)
    return {CertAction::kNewLeaf, "the serving certificate expires in " +
                                      Hours(f.leaf.not_after - now) +
                                      ", less than a third of its life"};
  for (const CertInfo& c : f.bundle)
    if (c.not_after <= now) return {CertAction::kPruneBundle, "the CA bundle holds an expired CA"};
  return {CertAction::kKeep, "valid"};
}

CertFacts InspectCertificates(const CertMaterial& m, bool present) {
  CertFacts f;
  f.present = present;
  if (!present) return f;
  std::vector<X509Ptr> bundle = ReadCerts(m.ca_crt);
  for (const X509Ptr& x : bundle) f.bundle.push_back(Info(x.get()));
  KeyPtr ca_key = ReadKey(m.ca_key);
  X509* ca = nullptr;
  if (bundle.empty()) {
    f.ca_problem = "ca.crt holds no PEM certificate";
  } else if (!ca_key) {
    f.ca_problem = "ca.key is not a PEM private key";
  } else if ((ca = MatchingCa(bundle, ca_key.get())) == nullptr) {
    f.ca_problem = "no CA certificate in ca.crt matches ca.key";
  } else {
    f.ca_usable = true;
    f.ca = Info(ca);
  }
  std::vector<X509Ptr> leaf = ReadCerts(m.tls_crt);
  KeyPtr leaf_key = ReadKey(m.tls_key);
  if (leaf.empty()) {
    f.leaf_problem = "tls.crt holds no PEM certificate";
  } else if (!leaf_key) {
    f.leaf_problem = "tls.key is not a PEM private key";
  } else if (X509_check_private_key(leaf[0].get(), leaf_key.get()) != 1) {
    f.leaf_problem = "tls.key does not match tls.crt";
  } else if (ca == nullptr || X509_verify(leaf[0].get(), X509_get0_pubkey(ca)) != 1) {
    f.leaf_problem = "tls.crt is not signed by the CA";
  } else {
    f.leaf_usable = true;
    f.leaf = Info(leaf[0].get());
  }
  ERR_clear_error();
  return f;
}

Result<CertMaterial> IssueCertificates(const CertMaterial& current, CertAction action,
                                       const std::vector<std::string>& dns_names, int64_t now,
                                       const CertPolicy& p) {
  if (action == CertAction::kKeep) return current;
  if (dns_names.empty()) return Status::InvalidArgument("webhook certificate: no DNS names");
  ERR_clear_error();
  std::vector<X509Ptr> old_bundle = ReadCerts(current.ca_crt);
  KeyPtr ca_key;
  X509Ptr ca_owned;
  X509* ca = nullptr;
  CertMaterial out = current;
  if (action == CertAction::kNewCa) {
    GPUSHARE_ASSIGN_OR_RETURN(ca_key, NewKey());
    GPUSHARE_ASSIGN_OR_RETURN(
        ca_owned,
        NewCert(ca_key.get(), "gpushare-webhook-ca@" + std::to_string(now), nullptr, ca_key.get(),
                now - p.backdate_s, now + p.ca_lifetime_s, /*ca=*/true, {}));
    ca = ca_owned.get();
    out.ca_key = KeyPem(ca_key.get());
  } else {
    ca_key = ReadKey(current.ca_key);
    if (!ca_key || (ca = MatchingCa(old_bundle, ca_key.get())) == nullptr)
      return Status::FailedPrecondition("webhook certificate: the Secret's CA is unusable");
  }
  // The bundle: the current CA first, then the other CAs that have not expired.
  out.ca_crt = CertPem(ca);
  for (const X509Ptr& x : old_bundle) {
    if (X509_cmp(x.get(), ca) == 0 || X509_check_ca(x.get()) <= 0) continue;
    if (Info(x.get()).not_after <= now) continue;
    out.ca_crt += CertPem(x.get());
  }
  if (action == CertAction::kNewLeaf || action == CertAction::kNewCa) {
    GPUSHARE_ASSIGN_OR_RETURN(KeyPtr k, NewKey());
    const int64_t ca_end = Info(ca).not_after;
    GPUSHARE_ASSIGN_OR_RETURN(
        X509Ptr leaf, NewCert(k.get(), dns_names.back(), ca, ca_key.get(), now - p.backdate_s,
                              std::min(now + p.leaf_lifetime_s, ca_end), /*ca=*/false, dns_names));
    out.tls_crt = CertPem(leaf.get());
    out.tls_key = KeyPem(k.get());
  }
  ERR_clear_error();
  return out;
}

}  // namespace gpushare::scheduler
