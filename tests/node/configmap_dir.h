// ConfigMapDir: a directory laid out as kubelet lays out a ConfigMap volume, for tests of
// --config-dir: <dir>/..<generation>/NAME files, <dir>/..data -> ..<generation>, and
// <dir>/NAME -> ..data/NAME. An update publishes a new generation and swaps ..data with one
// rename, as kubelet's atomic writer does.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace gpushare::testing {

class ConfigMapDir {
 public:
  explicit ConfigMapDir(std::string dir) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_);
  }

  void Publish(const std::map<std::string, std::string>& files) {
    namespace fs = std::filesystem;
    const std::string gen = "..2025_01_01_00_00_" + std::to_string(++generation_);
    fs::create_directories(dir_ + "/" + gen);
    for (const auto& [n, text] : files) std::ofstream(dir_ + "/" + gen + "/" + n) << text;
    fs::create_symlink(gen, dir_ + "/..data_tmp");
    fs::rename(dir_ + "/..data_tmp", dir_ + "/..data");
    for (const auto& [n, text] : files) {
      if (!fs::is_symlink(dir_ + "/" + n)) fs::create_symlink("..data/" + n, dir_ + "/" + n);
    }
  }

  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
  int generation_ = 0;
};

}  // namespace gpushare::testing
