// RegistrationLifecycle: when each device plugin of a node is served, served again and
// registered with kubelet, as a pure state machine.
//
// Events and the current time (milliseconds on any monotonic clock) go in; the steps to take
// now and the next time anything is due come out. No I/O, no threads, no clock: the agent's loop
// (node/agent.cc) does the serving and the gRPC calls and reports their outcome, and the tests
// drive every sequence with a fake clock (tests/deviceplugin/registration_lifecycle_test.cc).
//
// What it promises, and why (kubernetes-protocols.md section 1.5; issue 10 point 4):
//   - Registrations never wait for one another: each slot has at most one Register in flight,
//     and every slot's Register is issued as soon as it is due, whatever the others are doing.
//     (Kubelet dials the plugin back inside Register, for up to 10 s when the socket is gone, so
//     one slow Register must not hold up the rest.)
//   - A Register is never left to wait out kubelet's dial-back of a socket that no longer
//     exists: when the socket is lost (deleted or replaced) or kubelet restarts, the attempt in
//     flight is cancelled at once (kCancelRegister) and the slot is served anew and registered
//     again.
//   - Kubelet deletes every socket when it starts and then serves kubelet.sock; the events of
//     one restart (our sockets deleted, kubelet.sock created, streams ended) are coalesced by a
//     short debounce into one stop/serve/register per slot.
//   - A server whose ListAndWatch streams were open is stopped `settle` before it is served
//     again, so that the end of an old stream cannot reach kubelet after the new registration
//     (kubelet issues #121994/#127803); after a kubelet restart the old streams died with the
//     old kubelet, and the settle is not waited for.
//   - Failures (serve or Register) are retried after a backoff that doubles from min_backoff to
//     max_backoff; a kubelet (re)start ends any such wait.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace gpushare::deviceplugin {

struct LifecycleTiming {
  int64_t debounce_ms = 20;       // after an event that loses sockets, before serving again
  int64_t max_debounce_ms = 100;  // further events extend the debounce up to this after the first
  int64_t settle_ms = 100;        // after stopping a server with open streams (see above)
  int64_t min_backoff_ms = 200;   // a failed serve or Register is retried after this...
  int64_t max_backoff_ms = 5000;  // ...doubling up to this
};

enum class LifecycleStep {
  kCancelRegister,  // cancel the Register `attempt` of the slot's server (do not wait for it)
  kStop,            // stop the slot's server (its socket goes); then report Stopped()
  kServe,           // serve the slot anew (a fresh socket); then report Served()
  kRegister,        // start Register `attempt` without waiting; later report RegisterDone()
};

struct LifecycleAction {
  LifecycleStep step;
  size_t slot = 0;
  uint64_t attempt = 0;  // kRegister, kCancelRegister
  std::string reason;    // why the slot is served again (kStop, kServe), for the log
};

class RegistrationLifecycle {
 public:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  explicit RegistrationLifecycle(LifecycleTiming timing = {}) : t_(timing) {}

  // A new set of `slots` plans (start, reload): none is serving; each is served at `first_serve_ms`
  // and then registered. The caller has stopped the servers of the previous set.
  void Reset(size_t slots, int64_t first_serve_ms, const std::string& reason);

  // ---- events -----------------------------------------------------------------------------
  // Kubelet (re)started: it deleted every socket; every slot is served again and registered,
  // backoffs are forgotten.
  void KubeletStarted(int64_t now, const std::string& reason);
  // The slot's socket is gone or is not the one its server created.
  void SocketLost(size_t slot, int64_t now);
  // Kubelet's ListAndWatch stream of the slot's current server ended (kubelet never reopens it).
  void StreamEnded(size_t slot, int64_t now);

  // ---- outcomes of the steps --------------------------------------------------------------
  void Stopped(size_t slot, bool had_open_streams, int64_t now);
  void Served(size_t slot, bool ok, int64_t now);
  // Returns false when the outcome is stale (the attempt was cancelled or superseded) and was
  // ignored.
  bool RegisterDone(size_t slot, uint64_t attempt, bool ok, int64_t now);

  // ---- decisions --------------------------------------------------------------------------
  // The steps due at `now`, at most one per slot besides a cancellation. Call again after
  // reporting Stopped()/Served(): a stop is followed by a serve, a serve by a Register.
  std::vector<LifecycleAction> Poll(int64_t now);
  // When the next step is due: `now` when one is due already, kNever when nothing is pending
  // until an event or an outcome.
  int64_t NextWakeMs(int64_t now) const;

  // ---- observations -----------------------------------------------------------------------
  size_t size() const { return slots_.size(); }
  bool serving(size_t slot) const { return slots_.at(slot).serving; }
  bool registered(size_t slot) const { return slots_.at(slot).registered; }
  bool registering(size_t slot) const { return slots_.at(slot).in_flight; }
  // A re-serve is pending (the socket is to be replaced before registering).
  bool reserve_pending(size_t slot) const { return slots_.at(slot).reserve; }
  int failures(size_t slot) const { return slots_.at(slot).failures; }
  // The wait before the slot's next retry, after its last failure (0 when it has not failed).
  int64_t backoff_ms(size_t slot) const { return slots_.at(slot).backoff_ms; }
  bool all_registered() const;

 private:
  struct Slot {
    bool serving = false;              // a server runs (served, not stopped since)
    bool reserve = true;               // stop (if serving) and serve anew before registering
    bool stepping = false;             // a kStop or kServe was handed out; its outcome is awaited
    uint64_t events = 0;               // re-serve requests so far
    uint64_t step_events = 0;          // ...when the last kStop/kServe was handed out
    bool after_kubelet_start = false;  // the pending re-serve follows a kubelet start
    int64_t reserve_since = 0;     // when the pending re-serve was asked for (bounds the debounce)
    int64_t due_ms = 0;            // the next serve (reserve) or Register, not before this
    bool in_flight = false;        // a Register is running
    uint64_t attempt = 0;          // id of the last Register handed out
    std::vector<uint64_t> cancel;  // attempts to cancel at the next Poll
    bool registered = false;
    int failures = 0;
    int64_t backoff_ms = 0;
    std::string reason = "start";
  };

  // Asks for a re-serve of `s` at the end of a debounce; the Register in flight is cancelled.
  void Reserve(Slot& s, int64_t now, const std::string& reason, bool kubelet_started);
  void Fail(Slot& s, int64_t now);

  LifecycleTiming t_;
  std::vector<Slot> slots_;
  uint64_t next_attempt_ = 1;
};

}  // namespace gpushare::deviceplugin
