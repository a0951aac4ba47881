#include "kube/errors.h"

#include <nlohmann/json.hpp>
#include <string>

#include "kube/objects.h"

namespace gpushare::kube {

std::string_view DefaultReason(long code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 406:
      return "NotAcceptable";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 412:
      return "PreconditionFailed";
    case 413:
      return "RequestEntityTooLarge";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "";
  }
}

namespace {

StatusCode CodeFor(long http, std::string_view reason) {
  switch (http) {
    case 400:
    case 405:
    case 406:
    case 415:
    case 422:
      return StatusCode::kInvalidArgument;
    case 401:
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 409:
      return reason == "AlreadyExists" ? StatusCode::kAlreadyExists : StatusCode::kAborted;
    case 410:
      return StatusCode::kFailedPrecondition;
    case 412:
      return StatusCode::kAborted;
    case 413:
      return StatusCode::kResourceExhausted;
    case 504:
      return StatusCode::kDeadlineExceeded;
    default:
      break;
  }
  if (http == 429 || http >= 500) return StatusCode::kUnavailable;
  if (http >= 400) return StatusCode::kInvalidArgument;
  return StatusCode::kInternal;  // a 1xx/2xx/3xx reply where an error was expected
}

}  // namespace

Status StatusFromApi(long http_code, std::string_view reason, std::string_view message) {
  std::string_view r = reason.empty() ? DefaultReason(http_code) : reason;
  std::string m = "HTTP " + std::to_string(http_code);
  if (!r.empty()) {
    m += ' ';
    m += r;
  }
  if (!message.empty()) {
    m += ": ";
    m += message;
  }
  return Status(CodeFor(http_code, r), std::move(m));
}

Status StatusFromHttp(long http_code, std::string_view body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.value("kind", "") == "Status") {
    Result<ApiStatus> st = DecodeApiStatus(j);
    if (st.ok()) return StatusFromApi(http_code, st->reason, st->message);
  }
  std::string snippet(body.substr(0, 200));
  for (char& c : snippet) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (body.size() > 200) snippet += "...";
  return StatusFromApi(http_code, "", snippet.empty() ? "" : "\"" + snippet + "\"");
}

}  // namespace gpushare::kube
