// probe.h: runs the fake-driver probe programs (tests/fakes/native/cuda) under the interposer.
//
// Each test gets a scratch directory with a fake-driver config, a region file path and a
// clean environment (only what is set here reaches the child: no sanitizer options, no stray
// LD_PRELOAD). Commands and output follow tests/fakes/native/cuda/cuda_probe.cc.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "interpose/region.h"

namespace gpushare::interpose::testing {

inline std::string FakesDir() {
  return GPUSHARE_FAKES_DIR;
}
inline std::string ProbeBin(const std::string& name) {
  return FakesDir() + "/cuda/bin/" + name;
}
inline std::string InterposerPath() {
  return std::string(GPUSHARE_LIB_DIR) + "/libgpushare-cuda.so";
}

// A scratch directory removed at destruction.
class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/gpushare-interpose-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~ScratchDir() {
    std::string cmd = "rm -rf '" + path_ + "'";
    int ignored = system(cmd.c_str());
    (void)ignored;
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream(File(name)) << text;
  }

 private:
  std::string path_;
};

struct ProbeResult {
  int status = -1;                 // exit status, or 128+signal
  std::vector<std::string> lines;  // stdout, one per command
  std::string err;                 // stderr
  // Words of the output line for the n-th command whose name is `cmd` (0-based n).
  std::vector<std::string> Find(const std::string& cmd, int n = 0) const {
    for (const std::string& l : lines) {
      std::istringstream in(l);
      std::vector<std::string> w;
      for (std::string t; in >> t;) w.push_back(t);
      if (!w.empty() && w[0] == cmd && n-- == 0) return w;
    }
    return {};
  }
  // The CUresult of that line (-1 if absent).
  int Rc(const std::string& cmd, int n = 0) const {
    auto w = Find(cmd, n);
    return w.size() > 1 ? std::stoi(w[1]) : -1;
  }
  std::string Value(const std::string& cmd, int i = 0, int n = 0) const {
    auto w = Find(cmd, n);
    return w.size() > 2 + static_cast<size_t>(i) ? w[2 + i] : "";
  }
  uint64_t Num(const std::string& cmd, int i = 0, int n = 0) const {
    std::string v = Value(cmd, i, n);
    return v.empty() ? 0 : std::stoull(v, nullptr, 0);
  }
};

using Env = std::map<std::string, std::string>;

// The environment of a probe: the fake driver on the library path, the interposer preloaded
// (unless preload is false), plus `extra`.
inline Env ProbeEnv(const ScratchDir& dir, bool preload, const Env& extra = {}) {
  Env env;
  env["PATH"] = "/usr/bin:/bin";
  env["LD_LIBRARY_PATH"] = FakesDir() + "/cuda";
  env["FAKE_CUDA_CONFIG"] = dir.File("fake.conf");
  env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = dir.File("region");
  env["GPUSHARE_LOG_LEVEL"] = "1";
  if (preload) env["LD_PRELOAD"] = InterposerPath();
  for (const auto& [k, v] : extra) {
    if (v.empty() && k.rfind("UNSET:", 0) == 0)
      env.erase(k.substr(6));
    else
      env[k] = v;
  }
  return env;
}

inline std::vector<char*> EnvArray(const Env& env, std::vector<std::string>* storage) {
  storage->clear();
  for (const auto& [k, v] : env) storage->push_back(k + "=" + v);
  std::vector<char*> out;
  for (std::string& s : *storage) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// A running probe (for tests that kill it or talk to it).
struct RunningProbe {
  pid_t pid = -1;
  int out_fd = -1;
  int in_fd = -1;
  std::string buffered;

  RunningProbe() = default;
  RunningProbe(const RunningProbe&) = delete;
  RunningProbe& operator=(const RunningProbe&) = delete;
  RunningProbe(RunningProbe&& o) noexcept
      : pid(o.pid), out_fd(o.out_fd), in_fd(o.in_fd), buffered(std::move(o.buffered)) {
    o.pid = -1;
    o.out_fd = o.in_fd = -1;
  }
  // A test that stops early (a failed ASSERT) must not leave the probe behind.
  ~RunningProbe() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      Wait();
    }
  }

  // Reads stdout until a line starting with `prefix` arrives (or EOF). Returns that line.
  std::string WaitFor(const std::string& prefix) {
    for (;;) {
      size_t nl;
      while ((nl = buffered.find('\n')) != std::string::npos) {
        std::string line = buffered.substr(0, nl);
        buffered.erase(0, nl + 1);
        if (line.rfind(prefix, 0) == 0) return line;
      }
      char buf[4096];
      ssize_t n = read(out_fd, buf, sizeof(buf));
      if (n <= 0) return "";
      buffered.append(buf, static_cast<size_t>(n));
    }
  }
  void Send(const std::string& line) {
    std::string l = line + "\n";
    ssize_t ignored = write(in_fd, l.data(), l.size());
    (void)ignored;
  }
  // Sends a command and returns the words of its answer: {command, CUresult, values...} (empty
  // at EOF).
  std::vector<std::string> Ask(const std::string& command) {
    Send(command);
    std::istringstream in(WaitFor(command.substr(0, command.find(' ')) + " "));
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    return words;
  }
  int Wait() {
    if (in_fd >= 0) close(in_fd);
    in_fd = -1;
    int st = 0;
    if (pid > 0) waitpid(pid, &st, 0);
    pid = -1;
    if (out_fd >= 0) close(out_fd);
    out_fd = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
};

// Starts a probe reading commands from stdin.
inline RunningProbe StartProbe(const std::string& binary, const Env& env) {
  int out[2], in[2];
  if (pipe(out) != 0 || pipe(in) != 0) return {};
  std::vector<std::string> storage;
  std::vector<char*> envp = EnvArray(env, &storage);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    char* argv[] = {const_cast<char*>(binary.c_str()), const_cast<char*>("-"), nullptr};
    execve(binary.c_str(), argv, envp.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  RunningProbe p;
  p.pid = pid;
  p.out_fd = out[0];
  p.in_fd = in[1];
  return p;
}

// Runs a probe with commands as arguments and collects its output.
inline ProbeResult RunProbe(const std::string& binary, const Env& env,
                            const std::vector<std::string>& commands) {
  int out[2], err[2];
  ProbeResult res;
  if (pipe(out) != 0 || pipe(err) != 0) return res;
  std::vector<std::string> storage;
  std::vector<char*> envp = EnvArray(env, &storage);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& c : commands) argv.push_back(const_cast<char*>(c.c_str()));
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(err[0]);
    execve(binary.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  std::string o, e;
  char buf[4096];
  // Drain both pipes (stderr is small; read it after stdout closes).
  for (ssize_t n; (n = read(out[0], buf, sizeof(buf))) > 0;) o.append(buf, static_cast<size_t>(n));
  for (ssize_t n; (n = read(err[0], buf, sizeof(buf))) > 0;) e.append(buf, static_cast<size_t>(n));
  close(out[0]);
  close(err[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  res.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  std::istringstream lines(o);
  for (std::string l; std::getline(lines, l);) res.lines.push_back(l);
  res.err = e;
  return res;
}

// Read-only view of a region file, to compare the interposer's accounting with the fake's.
class RegionView {
 public:
  explicit RegionView(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) return;
    void* m = mmap(nullptr, sizeof(RegionFile), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m != MAP_FAILED) file_ = static_cast<const RegionFile*>(m);
  }
  ~RegionView() {
    if (file_ != nullptr) munmap(const_cast<RegionFile*>(file_), sizeof(RegionFile));
  }
  bool ok() const { return file_ != nullptr; }
  const RegionFile* operator->() const { return file_; }
  uint64_t Used(int dev) const { return file_ == nullptr ? 0 : file_->devices[dev].used; }
  uint64_t Limit(int dev) const { return file_ == nullptr ? 0 : file_->devices[dev].memory_limit; }

 private:
  const RegionFile* file_ = nullptr;
};

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

}  // namespace gpushare::interpose::testing
