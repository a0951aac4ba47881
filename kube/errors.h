// How the Kubernetes API's failures become gpushare Status values.
//
// Every failed call returns a Status whose message carries the HTTP code, the API's reason and
// the API's own message, e.g. `HTTP 409 Conflict: Operation cannot be fulfilled on pods "p": the
// object has been modified; ...`. The code is chosen so that callers can branch on it:
//
//   HTTP                          StatusCode            helper
//   400 BadRequest, 422 Invalid   kInvalidArgument
//   401, 403                      kPermissionDenied
//   404 NotFound                  kNotFound             IsNotFound
//   409 AlreadyExists             kAlreadyExists
//   409 Conflict, 412             kAborted              IsConflict (re-read and retry)
//   410 Gone / Expired            kFailedPrecondition   IsExpired (relist from scratch)
//   413 RequestEntityTooLarge     kResourceExhausted
//   429, 5xx, transport errors    kUnavailable          (retry with backoff)
//   504, client-side timeouts     kDeadlineExceeded
//
// The client never returns kFailedPrecondition for anything but an expired resourceVersion,
// so IsExpired is exact for results of kube::Client and kube informers.
#pragma once

#include <string_view>

#include "core/status.h"

namespace gpushare::kube {

// Builds the Status for an HTTP error reply. `body` is the reply body (an API Status object
// when the server sent one; anything else is quoted, truncated, into the message).
Status StatusFromHttp(long http_code, std::string_view body);

// The same, when the API Status fields are already known (e.g. from a watch ERROR event).
Status StatusFromApi(long http_code, std::string_view reason, std::string_view message);

// The API's reason for an HTTP error code, for a reply that names none: 404 NotFound, 409
// Conflict, 410 Gone, ... ("" for a code without one). The API-server double of the tests
// answers with the same table.
std::string_view DefaultReason(long http_code);

inline bool IsExpired(const Status& s) {
  return s.code() == StatusCode::kFailedPrecondition;
}
inline bool IsConflict(const Status& s) {
  return s.code() == StatusCode::kAborted;
}
inline bool IsNotFound(const Status& s) {
  return s.code() == StatusCode::kNotFound;
}

}  // namespace gpushare::kube
