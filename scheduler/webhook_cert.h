// The webhook's self-managed serving certificate (docs/webhook.md): a private CA and a leaf for
// the webhook Service, kept in one kubernetes.io/tls Secret shared by every replica
// (tls.crt, tls.key, ca.crt = the CA bundle, ca.key), so that no cert-manager is needed.
//
// Two halves, both without I/O:
//   - DecideCert: the lifecycle decision, a pure function of what the Secret holds (as
//     CertFacts), the wanted DNS names and the current time (passed in: tests use a fake
//     clock). Keep; issue a new leaf with the existing CA (SANs changed, less than a third of
//     its life left, unusable); a new CA and leaf (absent, unparsable, less than
//     ca_renew_before left); or prune expired CAs from the bundle.
//   - InspectCertificates / IssueCertificates: OpenSSL, PEM in and out. ECDSA P-256 keys,
//     SHA-256 signatures, X.509 v3. notBefore is set an hour back to tolerate clock skew
//     between replicas and the API server. A new CA keeps the old, still unexpired CAs in the
//     bundle (ca.crt) after itself, so that a client holding either the old or the new bundle
//     accepts either leaf while replicas and the MutatingWebhookConfiguration catch up; an old
//     CA leaves the bundle when it expires (its leaves never outlive it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpushare::scheduler {

inline constexpr int64_t kDaySeconds = 24 * 3600;

struct CertPolicy {
  int64_t ca_lifetime_s = 5 * 365 * kDaySeconds;
  int64_t leaf_lifetime_s = 365 * kDaySeconds;
  int64_t ca_renew_before_s = 365 * kDaySeconds;  // a new CA when less than this is left
  int64_t backdate_s = 3600;                      // notBefore = now - backdate
};

// The PEM texts of the Secret's four keys ("" when a key is absent).
struct CertMaterial {
  std::string tls_crt;  // the leaf
  std::string tls_key;
  std::string ca_crt;  // the CA bundle: the current CA first, then older ones still valid
  std::string ca_key;

  bool operator==(const CertMaterial&) const = default;
};

// What one certificate says (times in Unix seconds).
struct CertInfo {
  int64_t not_before = 0;
  int64_t not_after = 0;
  std::vector<std::string> dns_names;  // subjectAltName DNS entries
};

// What the Secret holds, as far as the decision needs it.
struct CertFacts {
  bool present = false;      // the Secret exists
  bool ca_usable = false;    // ca.key parses and matches a CA certificate in ca.crt
  std::string ca_problem;    // why not
  CertInfo ca;               // that certificate
  bool leaf_usable = false;  // tls.crt/tls.key parse, match, and the leaf is signed by that CA
  std::string leaf_problem;
  CertInfo leaf;
  std::vector<CertInfo> bundle;  // every certificate in ca.crt
};

enum class CertAction {
  kKeep,
  kNewLeaf,      // a new leaf signed by the existing CA; the bundle stays
  kNewCa,        // a new CA and leaf; the bundle is the new CA, then the old unexpired ones
  kPruneBundle,  // drop expired CAs from the bundle; CA and leaf stay
};
std::string_view CertActionName(CertAction a);

struct CertDecision {
  CertAction action = CertAction::kKeep;
  std::string reason;  // for the log
};

CertDecision DecideCert(const CertFacts& facts, const std::vector<std::string>& dns_names,
                        int64_t now, const CertPolicy& policy = {});

// Parses the material (present: whether the Secret exists). Never fails: what does not parse is
// reported in the *_problem fields.
CertFacts InspectCertificates(const CertMaterial& material, bool present);

// The material after `action` (not kKeep) at `now`, from `current` (ignored for kNewCa except
// for the bundle's older CAs). The leaf's SANs are `dns_names`, its CN the last of them (the
// fully qualified one).
Result<CertMaterial> IssueCertificates(const CertMaterial& current, CertAction action,
                                       const std::vector<std::string>& dns_names, int64_t now,
                                       const CertPolicy& policy = {});

// The DNS names the API server may use for Service NAME in NAMESPACE: NAME, NAME.NAMESPACE,
// NAME.NAMESPACE.svc, NAME.NAMESPACE.svc.cluster.local.
std::vector<std::string> ServiceDnsNames(const std::string& name, const std::string& ns);

}  // namespace gpushare::scheduler
