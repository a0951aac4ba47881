// AgentProcess: runs the real gpushare-node binary (from GPUSHARE_BIN_DIR) as a child process
// for integration tests, with its stdout and stderr captured in a log file.
// posix_spawn is used rather than fork: the test process runs gRPC threads.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace gpushare::testing {

inline std::string NodeBinary() {
  return std::string(GPUSHARE_BIN_DIR) + "/gpushare-node";
}

// A file under examples/ of the source tree.
inline std::string ExamplePath(const std::string& rel) {
  return std::string(GPUSHARE_SOURCE_DIR) + "/examples/" + rel;
}

// What gpushare-node advertises for examples/inventory/mixed.yaml with examples/config/mixed.yaml:
// a whole GPU, time-sliced replicas and two MIG profiles with replicas (4 resources).
inline const std::map<std::string, int>& MixedExampleCounts() {
  static const std::map<std::string, int> counts = {{"nvidia.com/gpu", 1},
                                                    {"nvidia.com/gpu.shared", 20},
                                                    {"nvidia.com/mig-3g.40gb", 3},
                                                    {"nvidia.com/mig-2g.20gb", 6}};
  return counts;
}

class AgentProcess {
 public:
  // `env`: overrides of the test's environment for the agent (an empty value removes a variable).
  AgentProcess(std::vector<std::string> args, std::string log_path,
               const std::map<std::string, std::string>& env = {})
      : log_(std::move(log_path)) {
    std::vector<std::string> argv_s = {NodeBinary()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    // The child starts with no signals blocked (the test's threads may block some).
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    std::vector<std::string> env_s;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string kv(*e);
      if (env.count(kv.substr(0, kv.find('='))) == 0) env_s.push_back(kv);
    }
    for (const auto& [k, v] : env)
      if (!v.empty()) env_s.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& kv : env_s) envp.push_back(kv.data());
    envp.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], &fa, &attr, argv.data(), envp.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
  }

  ~AgentProcess() {
    if (pid_ > 0 && !exit_code_) {
      ::kill(pid_, SIGKILL);
      int st;
      ::waitpid(pid_, &st, 0);
    }
  }

  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  void Signal(int sig) {
    if (pid_ > 0 && !exit_code_) ::kill(pid_, sig);
  }

  // The exit status (128 + signal when killed), or nullopt if still running at the deadline.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!exit_code_) {
      int st = 0;
      pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        exit_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return exit_code_;
  }

  bool Running() {
    Wait(std::chrono::milliseconds(0));
    return !exit_code_;
  }

  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // Waits until the log contains `text`.
  bool WaitForLog(const std::string& text, std::chrono::milliseconds timeout) const {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (Log().find(text) != std::string::npos) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

// A fixture's TearDown: stops a running agent with SIGTERM (10 s, then the destructor's
// SIGKILL) and, when the test failed, prints the head of its log (max_log bytes).
inline void StopAgent(AgentProcess* agent, bool test_failed, size_t max_log = std::string::npos) {
  if (agent == nullptr) return;
  if (agent->Running()) {
    agent->Signal(SIGTERM);
    agent->Wait(std::chrono::seconds(10));
  }
  if (test_failed)
    std::cerr << "---- agent log ----\n"
              << agent->Log().substr(0, max_log) << "\n-------------------\n";
}

}  // namespace gpushare::testing
