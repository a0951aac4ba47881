#include "kube/http_mux.h"

#include <signal.h>

#include <algorithm>

#include "kube/client.h"

namespace gpushare::kube::detail {

struct HttpMux::Job {
  CURL* easy = nullptr;
  const Cancellation* cancel = nullptr;
  CURLcode result = CURLE_OK;
  bool cancelled = false;
  bool done = false;  // guarded by the mux's mu_
  CondVar cv;
};

HttpMux::HttpMux(size_t keep) : multi_(curl_multi_init()) {
  // Every request in flight a stream of one HTTP/2 connection where the server offers it.
  curl_multi_setopt(multi_, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
  // Without it curl sizes its cache by the transfers in it, and a burst's last transfers close
  // the HTTP/1.1 connections the next burst needs.
  curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(std::max<size_t>(keep, 1)));
  // The thread takes no signals: a process that waits for SIGINT or SIGTERM on a thread of its
  // choosing (sigwait, signalfd) must not have them delivered here, with their default action.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  thread_ = std::thread([this] { Loop(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

HttpMux::~HttpMux() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  curl_multi_wakeup(multi_);
  thread_.join();
  curl_multi_cleanup(multi_);
}

CURLcode HttpMux::Run(CURL* easy, const Cancellation* cancel, bool* cancelled) {
  Job job;
  job.easy = easy;
  job.cancel = cancel;
  curl_easy_setopt(easy, CURLOPT_PRIVATE, &job);
  // A request started while the connection is still being set up waits for it and becomes one
  // of its streams, instead of opening a connection of its own (a burst's first requests).
  curl_easy_setopt(easy, CURLOPT_PIPEWAIT, 1L);
  {
    MutexLock lock(&mu_);
    if (stop_) {
      *cancelled = true;
      return CURLE_ABORTED_BY_CALLBACK;
    }
    incoming_.push_back(&job);
  }
  curl_multi_wakeup(multi_);
  MutexLock lock(&mu_);
  while (!job.done) job.cv.Wait(&mu_);
  *cancelled = job.cancelled;
  return job.result;
}

void HttpMux::Finish(Job* job, CURLcode result, bool cancelled, std::vector<Job*>* running) {
  curl_multi_remove_handle(multi_, job->easy);
  running->erase(std::find(running->begin(), running->end(), job));
  MutexLock lock(&mu_);
  job->result = result;
  job->cancelled = cancelled;
  job->done = true;
  job->cv.NotifyOne();  // the caller returns and `job` (on its stack) is gone after this
}

void HttpMux::Loop() {
  std::vector<Job*> running;  // in the multi handle; only this thread touches it
  for (;;) {
    bool stop = false;
    {
      MutexLock lock(&mu_);
      for (Job* j : incoming_) {
        curl_multi_add_handle(multi_, j->easy);
        running.push_back(j);
      }
      incoming_.clear();
      stop = stop_;
    }
    if (stop) {
      while (!running.empty()) Finish(running.back(), CURLE_ABORTED_BY_CALLBACK, true, &running);
      return;
    }
    int still = 0;
    const bool broken = curl_multi_perform(multi_, &still) != CURLM_OK;
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi_, &queued)) {
      if (msg->msg != CURLMSG_DONE) continue;
      void* p = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &p);
      Finish(static_cast<Job*>(p), msg->data.result, false, &running);
    }
    // From the back: Finish erases `running[i]`, which leaves the entries before it in place.
    for (size_t i = running.size(); i-- > 0;) {
      Job* j = running[i];
      if (broken) {
        Finish(j, CURLE_RECV_ERROR, false, &running);
      } else if (j->cancel != nullptr && j->cancel->cancelled()) {
        Finish(j, CURLE_ABORTED_BY_CALLBACK, true, &running);
      }
    }
    // Wakes for socket activity, curl's own timers (timeouts), curl_multi_wakeup (a new job, a
    // Cancellation firing, the destructor), or after a second at the latest.
    curl_multi_poll(multi_, nullptr, 0, 1000, nullptr);
  }
}

}  // namespace gpushare::kube::detail
