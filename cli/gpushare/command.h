// Subcommands of the `gpushare` CLI. Each subcommand lives in its own file in this folder and
// registers itself with a static GPUSHARE_COMMAND(...) object; main.cc only dispatches.
// (The files are compiled into the executable itself, so the registrars are never dropped.)
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace gpushare::cli {

// A subcommand: `setup` adds its options to the CLI11 subcommand and returns the function to
// run once parsing succeeded. The run function returns the process exit status.
struct Command {
  std::string name;
  std::string description;
  std::function<std::function<int()>(CLI::App&)> setup;
};

std::vector<Command>& CommandRegistry();

struct CommandRegistrar {
  explicit CommandRegistrar(Command c) { CommandRegistry().push_back(std::move(c)); }
};

}  // namespace gpushare::cli

#define GPUSHARE_COMMAND_CONCAT2(a, b) a##b
#define GPUSHARE_COMMAND_CONCAT(a, b) GPUSHARE_COMMAND_CONCAT2(a, b)
#define GPUSHARE_COMMAND(...)                                       \
  static ::gpushare::cli::CommandRegistrar GPUSHARE_COMMAND_CONCAT( \
      gpushare_command_, __LINE__)(::gpushare::cli::Command{__VA_ARGS__})
