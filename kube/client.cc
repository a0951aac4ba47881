// Client's REST verbs: see client.h. Paths (ResourcePath), queries, Get/List/Watch and the
// writes, each one HttpRequest through Do or JsonCall (client_transport.cc).
#include "kube/client.h"

#include "kube/errors.h"

namespace gpushare::kube {
namespace {

using nlohmann::json;

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
  if (!options.uid.empty()) body["preconditions"] = {{"uid", options.uid}};
  Result<json> j = JsonCall({"DELETE", ResourcePath(r, ns, name), body.dump(), "application/json"});
  return j.status();
}

}  // namespace gpushare::kube
