// The built-in default: a generated cluster and workload for `gpushare simulate` without
// --nodes/--pods (and `make demo`).
//
// The cluster mirrors the node mix of Alibaba's GPU trace (mostly 8-GPU nodes with 96 cores,
// many 2-GPU nodes with plenty of CPU, a few CPU-poor ones), with public GPU models and their
// memory sizes. Its share unit is MiB of GPU memory, so GPUs of different models have different
// capacities (the `aliyun.com/gpu-mem` case). The workload mixes the trace's statistics (13%
// CPU-only pods, fractional shares with the trace's size distribution on a 16 GiB GPU, whole-GPU
// jobs of 1/2/4/8 GPUs with the trace's CPU sizes) with the seed workloads: Knative services with 3
// GiB memory shares, time-sliced inference replicas (vLLM gpt2, 4 GiB each), and dedicated-GPU
// Knative services. Deterministic for a given seed.
//
// On the protocol's arrival axis a placed pod counts what it was given; a whole-GPU pod that
// failed counts `gpu_unit` MiB (the cluster's mean GPU memory) per GPU.
#pragma once

#include <cstdint>
#include <string>

#include "sim/trace.h"

namespace gpushare::sim {

struct GeneratorOptions {
  uint64_t seed = 2026;
  int nodes = 120;
  double load = 0.8;  // GPU demand of the generated pods as a fraction of GPU capacity
};

Workload GenerateDefaultWorkload(const GeneratorOptions& options = {});

// One pass of the pods, in seeded random order, through the placement policy.
struct PassResult {
  int64_t placed = 0;
  int64_t failed = 0;
  int gpus_in_use = 0;  // GPUs with at least one pod
};

// How many GPUs the workload needs with and without sharing.
struct SharingComparison {
  int cluster_gpus = 0;
  int64_t pods = 0;
  int64_t gpu_pods = 0;
  PassResult shared;  // with sharing: the pods as they are, through `policy`
  // Without sharing: every GPU pod takes whole GPUs (a share becomes one GPU).
  int64_t whole_gpus_needed = 0;  // sum of GPUs over GPU pods: exact, whatever the placement
  PassResult whole;               // the same pass with every share made a whole GPU
};

Result<SharingComparison> CompareSharing(const Workload& workload, const std::string& policy,
                                         uint64_t seed);
std::string SharingReport(const SharingComparison& c, const std::string& policy);

}  // namespace gpushare::sim
