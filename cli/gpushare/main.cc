// gpushare: the command-line tool. Dispatches to the subcommands registered in this folder
// (simulate, inspect, validate, ...). An unknown subcommand is named, with the closest known one
// when it looks like a typo: `gpushare simulat` -> unknown command "simulat" (did you mean
// "simulate"?).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/gpushare/command.h"
#include "cli/version.h"
#include "core/problem_list.h"

namespace gpushare::cli {
std::vector<Command>& CommandRegistry() {
  static std::vector<Command> registry;
  return registry;
}

namespace {

// Levenshtein distance (commands are short).
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// "gpushare: unknown command ..." when the first argument that is not an option names no
// command, else "".
std::string UnknownCommand(int argc, char** argv, const std::vector<Command>& commands) {
  if (argc < 2 || argv[1][0] == '-') return "";
  const std::string_view given = argv[1];
  std::string names, closest;
  size_t best = 3;  // suggest only within two edits (or a prefix)
  for (const auto& c : commands) {
    if (c.name == given) return "";
    names += (names.empty() ? "" : ", ") + c.name;
    const size_t d = c.name.rfind(given, 0) == 0 ? 0 : EditDistance(given, c.name);
    if (d < best) {
      best = d;
      closest = c.name;
    }
  }
  std::string msg = "gpushare: unknown command \"" + EscapeControlBytes(given.substr(0, 64)) + "\"";
  if (!closest.empty()) msg += " (did you mean \"" + closest + "\"?)";
  return msg + "; commands: " + names;
}

}  // namespace
}  // namespace gpushare::cli

int main(int argc, char** argv) {
  using gpushare::cli::CommandRegistry;
  // As a kubectl plugin (docs/inspect.md): `kubectl gpushare ARGS` runs kubectl-gpushare ARGS;
  // `kubectl inspect gpushare ARGS` (Alibaba's plugin name) runs kubectl-inspect-gpushare ARGS,
  // which means `inspect ARGS`.
  const std::string_view self = argc > 0 ? std::string_view(argv[0]) : "gpushare";
  const std::string_view base =
      self.substr(self.rfind('/') == std::string_view::npos ? 0 : self.rfind('/') + 1);
  std::vector<char*> args(argv, argv + argc);
  static char inspect[] = "inspect";
  if (base == "kubectl-inspect-gpushare") args.insert(args.begin() + 1, inspect);
  argc = static_cast<int>(args.size());
  argv = args.data();
  const std::string name = base.starts_with("kubectl-") ? "kubectl gpushare" : "gpushare";
  CLI::App app{"gpushare: GPU sharing for Kubernetes (simulate, inspect, validate)", name};
  app.set_version_flag("--version", gpushare::cli::VersionLine("gpushare"));
  app.require_subcommand(1);
  auto& commands = CommandRegistry();
  std::sort(commands.begin(), commands.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  if (std::string unknown = gpushare::cli::UnknownCommand(argc, argv, commands); !unknown.empty()) {
    std::fprintf(stderr, "%s\nRun with --help for more information.\n", unknown.c_str());
    return 2;
  }
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
