#include "sim/trace.h"

#include <array>
#include <unordered_map>

#include "config/csv.h"

namespace gpushare::sim {

using config::CsvError;
using config::CsvFile;
using config::CsvRow;
namespace {

constexpr int64_t kMaxInt = int64_t{1} << 50;

// The indexes of the columns `names`, in their order; an error names the first one missing.
template <size_t N>
Result<std::array<int, N>> Columns(const CsvFile& f, const std::array<std::string_view, N>& names) {
  std::array<int, N> out{};
  for (size_t i = 0; i < N; ++i) {
    GPUSHARE_ASSIGN_OR_RETURN(out[i], f.Column(names[i]));
  }
  return out;
}

// The column that names each row (a node's sn, a pod's name): required, and unique in the file.
class NameColumn {
 public:
  // `header`: the column's name; `what`: what a row is ("node").
  NameColumn(int column, std::string_view header, std::string_view what)
      : column_(column), header_(header), what_(what) {}

  // The row's name, or an error naming the line that had it first.
  Result<std::string> Read(const CsvFile& f, const CsvRow& row) {
    GPUSHARE_ASSIGN_OR_RETURN(std::string name, f.String(row, column_, header_, true));
    if (auto [it, fresh] = first_line_.emplace(name, row.line); !fresh)
      return CsvError(f.Where(row, column_) + ": " + std::string(header_) + ": duplicate " +
                      std::string(what_) + " '" + name + "' (first on line " +
                      std::to_string(it->second) + ")");
    return name;
  }

 private:
  int column_;
  std::string_view header_, what_;
  std::unordered_map<std::string, int> first_line_;
};

Result<std::vector<placement::NodeSpec>> NodesFrom(const CsvFile& f) {
  GPUSHARE_ASSIGN_OR_RETURN(const auto columns,
                            Columns<5>(f, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}));
  const auto [sn, cpu, mem, gpu, model] = columns;
  NameColumn names(sn, "sn", "node");
  std::vector<placement::NodeSpec> nodes;
  for (const auto& row : f.rows()) {
    placement::NodeSpec n;
    GPUSHARE_ASSIGN_OR_RETURN(n.name, names.Read(f, row));
    GPUSHARE_ASSIGN_OR_RETURN(auto c, f.Int(row, cpu, "cpu_milli", 0, kMaxInt));
    GPUSHARE_ASSIGN_OR_RETURN(auto m, f.Int(row, mem, "memory_mib", 0, kMaxInt));
    GPUSHARE_ASSIGN_OR_RETURN(auto g, f.Int(row, gpu, "gpu", 0, placement::kMaxGpusPerNode));
    GPUSHARE_ASSIGN_OR_RETURN(auto md, f.String(row, model, "model", false));
    n.cpu_milli = c;
    n.memory_mib = m;
    n.gpu_model = md;
    if (n.gpu_model == "nan") n.gpu_model.clear();  // pandas' rendering of an empty cell
    if (g > 0 && n.gpu_model.empty())
      return CsvError(f.Where(row, model) + ": model: a node with GPUs needs a GPU model");
    n.gpu_capacity.assign(static_cast<size_t>(g), kMilliPerGpu);
    nodes.push_back(std::move(n));
  }
  if (nodes.empty()) return CsvError(f.path() + ": no nodes");
  return nodes;
}

Result<std::vector<TracePod>> PodsFrom(const CsvFile& f) {
  GPUSHARE_ASSIGN_OR_RETURN(const auto columns, Columns<5>(f, {"name", "cpu_milli", "memory_mib",
                                                               "num_gpu", "gpu_milli"}));
  const auto [name, cpu, mem, num, milli] = columns;
  const int spec = f.FindColumn("gpu_spec");
  const int created = f.FindColumn("creation_time");
  const int deleted = f.FindColumn("deletion_time");
  NameColumn names(name, "name", "pod");
  std::vector<TracePod> pods;
  for (const auto& row : f.rows()) {
    TracePod p;
    p.line = row.line;
    GPUSHARE_ASSIGN_OR_RETURN(p.name, names.Read(f, row));
    GPUSHARE_ASSIGN_OR_RETURN(auto c, f.Int(row, cpu, "cpu_milli", 0, kMaxInt));
    GPUSHARE_ASSIGN_OR_RETURN(auto m, f.Int(row, mem, "memory_mib", 0, kMaxInt));
    GPUSHARE_ASSIGN_OR_RETURN(auto n, f.Int(row, num, "num_gpu", 0, placement::kMaxGpusPerNode));
    GPUSHARE_ASSIGN_OR_RETURN(auto g, f.Int(row, milli, "gpu_milli", 0, kMilliPerGpu));
    if (n == 0 && g != 0)
      return CsvError(f.Where(row, milli) + ": gpu_milli: must be 0 when num_gpu is 0, got " +
                      std::to_string(g));
    if (n > 0 && g == 0)
      return CsvError(f.Where(row, milli) + ": gpu_milli: must be > 0 when num_gpu is " +
                      std::to_string(n));
    if (n > 1 && g < kMilliPerGpu)
      return CsvError(f.Where(row, milli) +
                      ": gpu_milli: a share below 1000 needs num_gpu = 1, got " +
                      std::to_string(n) + " GPUs x " + std::to_string(g));
    if (spec >= 0) {
      GPUSHARE_ASSIGN_OR_RETURN(auto s, f.String(row, spec, "gpu_spec", false));
      p.gpu_spec = s == "nan" ? std::string() : s;
    }
    if (created >= 0) {
      GPUSHARE_ASSIGN_OR_RETURN(auto t, f.OptionalInt(row, created, "creation_time", 0, kMaxInt));
      p.creation_time = t;
    }
    if (deleted >= 0) {
      GPUSHARE_ASSIGN_OR_RETURN(auto t, f.OptionalInt(row, deleted, "deletion_time", 0, kMaxInt));
      p.deletion_time = t;
    }
    p.num_gpu = static_cast<int>(n);
    p.gpu_milli = g;
    p.request = placement::MakePodRequest(c, m, p.num_gpu, p.gpu_milli, p.gpu_spec, kMilliPerGpu);
    pods.push_back(std::move(p));
  }
  if (pods.empty()) return CsvError(f.path() + ": no pods");
  return pods;
}

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string b = slash == std::string::npos ? path : path.substr(slash + 1);
  if (b.size() > 4 && b.compare(b.size() - 4, 4, ".csv") == 0) b.resize(b.size() - 4);
  return b;
}

}  // namespace

Result<std::vector<placement::NodeSpec>> ParseNodeCsv(const std::string& path,
                                                      std::string_view content) {
  GPUSHARE_ASSIGN_OR_RETURN(auto f, CsvFile::Parse(path, content));
  return NodesFrom(f);
}

Result<std::vector<TracePod>> ParsePodCsv(const std::string& path, std::string_view content) {
  GPUSHARE_ASSIGN_OR_RETURN(auto f, CsvFile::Parse(path, content));
  return PodsFrom(f);
}

Result<std::vector<placement::NodeSpec>> LoadNodeCsv(const std::string& path) {
  GPUSHARE_ASSIGN_OR_RETURN(auto f, CsvFile::Read(path, "node list CSV", "nodes.csv"));
  return NodesFrom(f);
}

Result<std::vector<TracePod>> LoadPodCsv(const std::string& path) {
  GPUSHARE_ASSIGN_OR_RETURN(auto f, CsvFile::Read(path, "pod list CSV", "pods.csv"));
  return PodsFrom(f);
}

Result<Workload> LoadWorkload(const std::string& nodes_path, const std::string& pods_path) {
  Workload w;
  GPUSHARE_ASSIGN_OR_RETURN(auto nodes, LoadNodeCsv(nodes_path));
  GPUSHARE_ASSIGN_OR_RETURN(auto pods, LoadPodCsv(pods_path));
  w.name = BaseName(pods_path);
  w.nodes = std::move(nodes);
  w.pods = std::move(pods);
  return w;
}

}  // namespace gpushare::sim
