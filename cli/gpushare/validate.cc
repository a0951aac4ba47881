// gpushare validate FILE [--inventory INVENTORY]: checks a sharing config file offline.
// Prints one line per problem (field path, what is allowed, file:line:col; at most 20, then a
// count of the rest) and exits 2, or "FILE: valid" with any warnings (a file without settings)
// and notes and exits 0. With --inventory it also builds the resource plan
// for that node, so selectors, collisions and the per-GPU ceiling are checked too; the plan's
// resources are listed on success. Flags and environment variables are not applied: the file
// is checked as written.
#include <cstdio>
#include <string>

#include "base/strings.h"
#include "cli/gpushare/command.h"
#include "config/node_config_loader.h"
#include "core/resource_plan.h"
#include "gpu/file_inventory.h"

namespace gpushare::cli {
namespace {

constexpr int kInvalid = 2;

void PrintProblems(const Status& s) {
  for (const auto& line : SplitLines(s.message())) std::printf("%s\n", line.c_str());
}

struct ValidateArgs {
  std::string file;
  std::string inventory;
};

int RunValidate(const ValidateArgs& a) {
  auto loaded = ValidateConfigFile(a.file);
  if (!loaded.ok()) {
    PrintProblems(loaded.status());
    return kInvalid;
  }
  std::vector<std::string> notes = loaded->notes;
  std::string summary;
  if (!a.inventory.empty()) {
    auto inv = LoadInventoryFile(a.inventory);
    if (!inv.ok()) {
      PrintProblems(inv.status());
      return kInvalid;
    }
    auto plan = BuildResourcePlan(*inv, loaded->config);
    if (!plan.ok()) {
      PrintProblems(plan.status());
      return kInvalid;
    }
    notes.insert(notes.end(), plan->notes.begin(), plan->notes.end());
    for (const auto& r : plan->resources) {
      summary += "  " + r.name + ": " + std::to_string(r.devices.size()) + "\n";
    }
  }
  std::printf("%s: valid%s\n", a.file.c_str(),
              a.inventory.empty() ? "" : (" for " + a.inventory).c_str());
  std::fputs(summary.c_str(), stdout);
  for (const auto& w : loaded->warnings) std::printf("warning: %s\n", w.c_str());
  for (const auto& n : notes) std::printf("note: %s\n", n.c_str());
  return 0;
}

GPUSHARE_COMMAND(
    "validate",
    "check a sharing config file (NVIDIA device plugin format + gpushare section) offline",
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<ValidateArgs>();
      app.add_option("file", args->file, "config file (YAML or JSON)")->required();
      app.add_option("--inventory", args->inventory,
                     "also plan against this inventory file (docs/inventory.md)");
      return [args]() { return RunValidate(*args); };
    });

}  // namespace
}  // namespace gpushare::cli
