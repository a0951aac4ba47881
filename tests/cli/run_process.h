// Runs a real binary as a child process (fork + execve) and collects its exit status, stdout
// and stderr, for the CLI tests. The environment is the parent's plus `env` overrides (an
// empty value removes a variable).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace gpushare::testing {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  std::string out, err;
  long max_rss_kib = 0;  // the child's peak resident set (getrusage ru_maxrss), when waited for
  double seconds = 0;    // from start to exit
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {}) {
    static int counter = 0;
    const std::string base =
        "/tmp/gpushare_cli_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    out_path_ = base + ".out";
    err_path_ = base + ".err";
    std::map<std::string, std::string> merged;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv(*e);
      size_t eq = kv.find('=');
      if (eq != std::string::npos) merged[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto& [k, v] : env) {
      if (v.empty())
        merged.erase(k);
      else
        merged[k] = v;
    }
    std::vector<std::string> envs;
    for (const auto& [k, v] : merged) envs.push_back(k + "=" + v);
    start_ = std::chrono::steady_clock::now();
    pid_ = ::fork();
    if (pid_ == 0) {
      int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(out, 1);
      ::dup2(err, 2);
      std::vector<char*> a, e;
      for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
      a.push_back(nullptr);
      for (const auto& s : envs) e.push_back(const_cast<char*>(s.c_str()));
      e.push_back(nullptr);
      ::execve(a[0], a.data(), e.data());
      ::_exit(127);
    }
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::unlink(out_path_.c_str());
    ::unlink(err_path_.c_str());
  }

  // Waits until stderr contains `text` or the child exits; false after `limit`.
  bool WaitForStderr(const std::string& text,
                     std::chrono::seconds limit = std::chrono::seconds(20)) {
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      if (ReadAll(err_path_).find(text) != std::string::npos) return true;
      int status = 0;
      if (!reaped_ && ::wait4(pid_, &status, WNOHANG, &usage_) == pid_) {
        reaped_ = true;
        end_ = std::chrono::steady_clock::now();
        status_ = status;
        return ReadAll(err_path_).find(text) != std::string::npos;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  bool Exited() {
    if (reaped_) return true;
    int status = 0;
    if (::wait4(pid_, &status, WNOHANG, &usage_) == pid_) {
      reaped_ = true;
      end_ = std::chrono::steady_clock::now();
      status_ = status;
    }
    return reaped_;
  }

  void Signal(int sig) { ::kill(pid_, sig); }
  // What the child wrote on stdout so far.
  std::string Out() const { return ReadAll(out_path_); }

  ProcessResult Wait() {
    if (!reaped_) {
      ::wait4(pid_, &status_, 0, &usage_);
      reaped_ = true;
      end_ = std::chrono::steady_clock::now();
    }
    ProcessResult r;
    r.max_rss_kib = usage_.ru_maxrss;
    r.seconds = std::chrono::duration<double>(end_ - start_).count();
    r.exit_code = WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
    r.out = ReadAll(out_path_);
    r.err = ReadAll(err_path_);
    return r;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  struct rusage usage_ {};
  std::chrono::steady_clock::time_point start_, end_;
  std::string out_path_, err_path_;
};

inline ProcessResult RunProcess(const std::vector<std::string>& argv,
                                const std::map<std::string, std::string>& env = {}) {
  Child c(argv, env);
  return c.Wait();
}

// Writes `text` to a file in the test temp dir and returns its path.
inline std::string WriteTempFile(const std::string& name, const std::string& text) {
  std::string path =
      ::testing::TempDir() + "/gpushare_cli_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace gpushare::testing
