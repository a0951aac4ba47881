// HttpMux: the transfers of many threads on one curl multi handle, so they share connections.
//
// Each bind, patch or event of a busy client is its own request, and before this every thread
// ran its request on a connection of its own: 100 binds in flight were 100 TCP connections and,
// once the API server had closed them for idleness (90 s), 100 TLS handshakes, the largest CPU
// cost of a burst on both sides (docs/benchmarks.md). Here one thread drives every unary
// request of a client on one multi handle: over TLS the API server offers HTTP/2 (ALPN), and
// every request in flight becomes a stream of one connection, as client-go's requests are. A
// server without HTTP/2 (plain HTTP, an old proxy) gets HTTP/1.1 connections from the multi's
// shared cache, as many as requests in flight, kept for the next.
//
// Internal to kube/ (client.cc); callers see only Client.
#pragma once

#include <curl/curl.h>

#include <cstddef>
#include <thread>
#include <vector>

#include "base/sync.h"

namespace gpushare::kube {
class Cancellation;
}

namespace gpushare::kube::detail {

class HttpMux {
 public:
  // `keep`: connections kept open between requests (HTTP/1.1 only needs more than one).
  explicit HttpMux(size_t keep);
  // Stops the thread. Transfers still in flight (none while a Client is alive and idle) end
  // with CURLE_ABORTED_BY_CALLBACK.
  ~HttpMux();
  HttpMux(const HttpMux&) = delete;
  HttpMux& operator=(const HttpMux&) = delete;

  // Runs `easy` (configured, in no multi handle) to its end on the mux's thread and returns its
  // result. When `cancel` fires first the transfer is dropped, `*cancelled` is set and the
  // result is CURLE_ABORTED_BY_CALLBACK. The handle's callbacks run on the mux's thread while
  // the caller waits here.
  CURLcode Run(CURL* easy, const Cancellation* cancel, bool* cancelled);

  // What a Cancellation wakes when it fires (the multi handle).
  void* wake_handle() const { return multi_; }

 private:
  struct Job;
  void Loop();
  // Takes `job` out of the multi handle and hands its outcome to its caller.
  void Finish(Job* job, CURLcode result, bool cancelled, std::vector<Job*>* running);

  CURLM* const multi_;
  Mutex mu_;
  std::vector<Job*> incoming_ GPUSHARE_GUARDED_BY(mu_);
  bool stop_ GPUSHARE_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace gpushare::kube::detail
