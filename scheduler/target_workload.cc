#include "scheduler/target_workload.h"

#include <map>
#include <utility>

#include "config/csv.h"

namespace gpushare::scheduler {
namespace {

namespace ms = memshare;
using config::CsvError;
using config::CsvFile;

constexpr int64_t kMaxCpuMilli = int64_t{1} << 40;

Result<std::vector<TargetPod>> From(const CsvFile& f) {
  GPUSHARE_ASSIGN_OR_RETURN(const int cpu, f.Column("cpu_milli"));
  GPUSHARE_ASSIGN_OR_RETURN(const int num, f.Column("num_gpu"));
  GPUSHARE_ASSIGN_OR_RETURN(const int milli, f.Column("gpu_milli"));
  const int count = f.FindColumn("count");
  std::map<std::pair<int64_t, int64_t>, int64_t> merged;
  int64_t total = 0;
  for (const auto& row : f.rows()) {
    GPUSHARE_ASSIGN_OR_RETURN(const int64_t c, f.Int(row, cpu, "cpu_milli", 0, kMaxCpuMilli));
    GPUSHARE_ASSIGN_OR_RETURN(const int64_t n,
                              f.Int(row, num, "num_gpu", 0, ms::kMaxWholeGpusPerContainer));
    GPUSHARE_ASSIGN_OR_RETURN(const int64_t g, f.Int(row, milli, "gpu_milli", 0, ms::kMilliPerGpu));
    if ((n == 0) != (g == 0))
      return CsvError(f.Where(row, milli) +
                      ": gpu_milli: must be 0 exactly when num_gpu is 0, got " + std::to_string(n) +
                      " GPUs x " + std::to_string(g));
    if (n > 1 && g < ms::kMilliPerGpu)
      return CsvError(f.Where(row, milli) +
                      ": gpu_milli: a share below 1000 needs num_gpu = 1, got " +
                      std::to_string(n) + " GPUs x " + std::to_string(g));
    int64_t k = 1;
    if (count >= 0) {
      GPUSHARE_ASSIGN_OR_RETURN(k, f.Int(row, count, "count", 1, kMaxTargetPods));
    }
    total += k;
    if (total > kMaxTargetPods)
      return CsvError(f.Where(row, count) + ": count: more than " + std::to_string(kMaxTargetPods) +
                      " pods in all");
    merged[{c, n * g}] += k;
  }
  if (merged.empty()) return CsvError(f.path() + ": no pods");
  std::vector<TargetPod> pods;
  pods.reserve(merged.size());
  for (const auto& [key, k] : merged) {
    TargetPod p;
    p.cpu_milli = key.first;
    p.gpu_milli = key.second;
    p.count = k;
    if (p.gpu_milli > 0) {
      ms::ContainerUnits u;
      u.name = "main";
      u.milli_limit = p.gpu_milli;
      Result<ms::PodRequest> r = ms::ComputePodRequest({u});
      if (!r.ok())
        return CsvError(f.path() + ": a pod of " + std::to_string(p.gpu_milli) +
                        " milli-GPU: " + r.status().message());
      p.request = std::move(r).value();
    }
    pods.push_back(std::move(p));
  }
  return pods;
}

}  // namespace

Result<std::vector<TargetPod>> ParseTargetWorkload(const std::string& path,
                                                   std::string_view content) {
  GPUSHARE_ASSIGN_OR_RETURN(const CsvFile f, CsvFile::Parse(path, content));
  return From(f);
}

Result<std::vector<TargetPod>> LoadTargetWorkload(const std::string& path) {
  GPUSHARE_ASSIGN_OR_RETURN(const CsvFile f,
                            CsvFile::Read(path, "target workload CSV", "workload.csv"));
  return From(f);
}

int64_t TargetPodCount(const std::vector<TargetPod>& pods) {
  int64_t n = 0;
  for (const TargetPod& p : pods) n += p.count;
  return n;
}

}  // namespace gpushare::scheduler
