#include "kube/informer.h"

#include <iostream>
#include <random>

#include "kube/errors.h"

namespace gpushare::kube::detail {
namespace {

constexpr size_t kKeptBackoffs = 32;

std::string Quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  out += '"';
  return out;
}

std::string ResourceVersionOf(const nlohmann::json& obj) {
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return "";
  auto rv = meta->find("resourceVersion");
  if (rv == meta->end() || !rv->is_string()) return "";
  return rv->get<std::string>();
}

}  // namespace

ListWatchLoop::ListWatchLoop(std::shared_ptr<Client> client, ResourceRef resource,
                             InformerOptions options, Sink* sink)
    : client_(std::move(client)), resource_(resource), options_(std::move(options)), sink_(sink) {
  if (options_.seed == 0) options_.seed = std::random_device{}();
  if (options_.watch_timeout_seconds < 1) options_.watch_timeout_seconds = 1;
}

ListWatchLoop::~ListWatchLoop() {
  Stop();
}

Status ListWatchLoop::Start() {
  if (!client_) return Status::InvalidArgument("informer: no client");
  if (started_.exchange(true)) {
    return Status::FailedPrecondition("informer for " + std::string(resource_.resource) +
                                      " was already started (an informer runs once)");
  }
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void ListWatchLoop::Stop() {
  stopping_.store(true);
  cancel_.Cancel();
  {
    MutexLock lock(&mu_);
    cv_.NotifyAll();
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

bool ListWatchLoop::synced() const {
  MutexLock lock(&mu_);
  return synced_;
}

bool ListWatchLoop::WaitForSync(std::chrono::milliseconds timeout) const {
  MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!synced_ && !stopping_.load()) {
    if (!cv_.WaitUntil(&mu_, deadline)) break;
  }
  return synced_;
}

InformerStats ListWatchLoop::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

void ListWatchLoop::Log(const std::string& line) const {
  std::string full =
      "component=kube-informer resource=" + std::string(resource_.resource) + " " + line;
  if (options_.log) {
    options_.log(full);
  } else {
    std::cerr << "level=warn " << full << '\n';
  }
}

void ListWatchLoop::RecordError(const Status& s, std::string_view what) {
  {
    MutexLock lock(&mu_);
    ++stats_.errors;
    stats_.last_error = s.ToString();
  }
  if (!stopping_.load()) Log("event=" + std::string(what) + " error=" + Quoted(s.ToString()));
}

bool ListWatchLoop::SleepBackoff(Backoff* backoff, const Status& why) {
  std::chrono::milliseconds d = backoff->Next();
  {
    MutexLock lock(&mu_);
    stats_.backoff_delays.push_back(d);
    if (stats_.backoff_delays.size() > kKeptBackoffs) {
      stats_.backoff_delays.erase(stats_.backoff_delays.begin());
    }
  }
  Log("event=backoff delay_ms=" + std::to_string(d.count()) +
      " attempt=" + std::to_string(backoff->attempts()) + " after=" + Quoted(why.ToString()));
  return cancel_.SleepFor(d);
}

void ListWatchLoop::Run() {
  Backoff backoff(options_.backoff, options_.seed);
  std::mt19937_64 rng(options_.seed ^ 0x9e3779b97f4a7c15ULL);
  std::string rv;
  bool need_list = true;
  bool fresh_from_list = false;  // rv came straight from a list, no watch progress since

  while (!stopping_.load()) {
    if (need_list) {
      {
        MutexLock lock(&mu_);
        ++stats_.lists;
      }
      ListOptions lo;
      lo.label_selector = options_.label_selector;
      lo.field_selector = options_.field_selector;
      lo.limit = options_.page_size;
      Result<RawList> list = client_->List(resource_, options_.namespace_, lo, &cancel_);
      if (stopping_.load()) break;
      if (!list.ok()) {
        RecordError(list.status(), "list_error");
        if (!SleepBackoff(&backoff, list.status())) break;
        continue;
      }
      rv = list->resource_version;
      sink_->Replace(std::move(list->items));
      need_list = false;
      fresh_from_list = true;
      backoff.Reset();
      bool first = false;
      {
        MutexLock lock(&mu_);
        stats_.resource_version = rv;
        if (!synced_) {
          synced_ = true;
          first = true;
        }
      }
      if (first) {
        sink_->Synced();
        MutexLock lock(&mu_);
        cv_.NotifyAll();
      }
    }

    {
      MutexLock lock(&mu_);
      ++stats_.watches;
    }
    WatchOptions wo;
    wo.label_selector = options_.label_selector;
    wo.field_selector = options_.field_selector;
    wo.resource_version = rv;
    wo.allow_bookmarks = options_.allow_bookmarks;
    int t = options_.watch_timeout_seconds;
    wo.timeout_seconds = t + static_cast<int>(rng() % static_cast<uint64_t>(t));
    bool progressed = false;
    Status event_error;
    auto started = std::chrono::steady_clock::now();
    Status s = client_->Watch(
        resource_, options_.namespace_, wo,
        [&](WatchEvent&& e) {
          if (stopping_.load()) return false;
          if (e.type == WatchEventType::kError) {
            Result<ApiStatus> st = DecodeApiStatus(e.object);
            if (st.ok()) {
              event_error = StatusFromApi(st->code, st->reason, st->message);
            } else {
              event_error = Status::Unavailable("watch ERROR event without a valid Status");
            }
            return false;
          }
          std::string new_rv = ResourceVersionOf(e.object);
          if (e.type == WatchEventType::kBookmark) {
            MutexLock lock(&mu_);
            ++stats_.bookmarks;
          } else {
            sink_->Apply(e.type, std::move(e.object));
            MutexLock lock(&mu_);
            ++stats_.events;
          }
          if (!new_rv.empty()) {
            rv = new_rv;
            progressed = true;
            MutexLock lock(&mu_);
            stats_.resource_version = rv;
          }
          return true;
        },
        &cancel_);
    if (stopping_.load()) break;
    if (!event_error.ok()) s = event_error;
    if (progressed) fresh_from_list = false;
    if (s.ok()) {
      if (progressed) backoff.Reset();
      // A watch that closes at once without any event would make us spin: back off then.
      if (!progressed && std::chrono::steady_clock::now() - started < std::chrono::seconds(1)) {
        Status quick = Status::Unavailable("watch closed immediately without events");
        RecordError(quick, "watch_closed");
        if (!SleepBackoff(&backoff, quick)) break;
      }
      continue;
    }
    RecordError(s, IsExpired(s) ? "watch_expired" : "watch_error");
    if (IsExpired(s)) {
      {
        MutexLock lock(&mu_);
        ++stats_.relists_after_expired;
      }
      need_list = true;
      // Relist at once, unless the version we just listed is already gone (then back off so a
      // server that keeps answering 410 is not hammered).
      if (fresh_from_list && !SleepBackoff(&backoff, s)) break;
      continue;
    }
    if (!SleepBackoff(&backoff, s)) break;
  }
}

}  // namespace gpushare::kube::detail
