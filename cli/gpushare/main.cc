// gpushare: the command-line tool. Dispatches to the subcommands registered in this folder
// (simulate, inspect, validate, ...).
#include <algorithm>
#include <cstdio>
#include <functional>

#include "cli/gpushare/command.h"

namespace gpushare::cli {
std::vector<Command>& CommandRegistry() {
  static std::vector<Command> registry;
  return registry;
}
}  // namespace gpushare::cli

int main(int argc, char** argv) {
  using gpushare::cli::CommandRegistry;
  CLI::App app{"gpushare: GPU sharing for Kubernetes (simulate, inspect, validate)", "gpushare"};
  app.require_subcommand(1);
  auto& commands = CommandRegistry();
  std::sort(commands.begin(), commands.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::function<int()> run;
  for (auto& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    auto fn = c.setup(*sub);
    sub->callback([&run, fn]() { run = fn; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return run ? run() : 2;
}
