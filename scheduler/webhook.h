// The mutating admission webhook of `scheduler.mode: second-scheduler` (docs/webhook.md): the
// API server sends every Pod CREATE to POST /mutate-pods; a pod that asks for the memory-share
// resource (any container or initContainer requests or limits it above zero) and has no
// scheduler of its own (spec.schedulerName empty or "default-scheduler") gets
// spec.schedulerName set to the gpushare profile of the second kube-scheduler. Every other pod,
// and every other kind or operation, is allowed unchanged: another scheduler name is the user's
// explicit choice and is never overridden.
//
// A pod that asks for shares and asks wrongly is refused (allowed: false, HTTP 400 in the
// status) with a message naming the field, rather than left to fail at kube-scheduler or
// kubelet: a request ComputePodRequest refuses (a fraction that is neither 1..999 nor whole
// GPUs, gpu-mem and gpu-milli in one pod, a request different from its limit), a malformed GPU
// choice (core/gpu_selector.h), or a nvidia.com/use-gputype model that no GPU of the cluster has
// (when the scheduler knows the cluster's models; nouse-gputype may name models the cluster has
// not got). A pod that asks no shares but names GPUs with those annotations (time-slices, MIG
// devices, whole GPUs, which gpushare-node's preferred allocation steers: node/gpu_choice.h) is
// checked the same way and otherwise allowed unchanged.
//
// Wire format: AdmissionReview admission.k8s.io/v1 (v1beta1 has the same shape and is answered
// in kind). The reply echoes apiVersion, kind and request.uid; a mutation is a base64 RFC 6902
// JSON patch with patchType "JSONPatch". A body that is not such a review is HTTP 400 with the
// reason (the API server then applies the configuration's failurePolicy).
//
// MutatePods is a pure function (bytes in, reply out); the HTTP server (net/http_server.h,
// scheduler/routes.h) calls it for POST /mutate-pods on the webhook listener.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/extender.h"

namespace gpushare::scheduler {

inline constexpr std::string_view kWebhookPath = "/mutate-pods";
inline constexpr std::string_view kDefaultWebhookSchedulerName = "gpushare-scheduler";
// HAMi's scheduler name (its chart's schedulerName), taken as unset with --hami-resources.
inline constexpr std::string_view kHamiSchedulerName = "hami-scheduler";

struct WebhookOptions {
  std::string resource_name = std::string(memshare::kResourceName);  // --resource-name
  std::string scheduler_name =
      std::string(kDefaultWebhookSchedulerName);  // --webhook-scheduler-name
  // HAMi's pod spec (--hami-resources): containers asking nvidia.com/gpumem,
  // nvidia.com/gpumem-percentage or nvidia.com/gpucores beside nvidia.com/gpu are rewritten into
  // gpushare's resources (core/hami_spec.h), and schedulerName "hami-scheduler" is taken as
  // unset. `unit` is what one unit of resource_name is (--memory-unit).
  bool hami_resources = false;
  memshare::MemoryUnit unit = memshare::MemoryUnit::kGiB;
  // The GPU models of the cluster's nodes (GpuCache::GpuModels); empty or unset: not known yet,
  // and no model name is refused.
  std::function<std::vector<std::string>()> gpu_models;
};

enum class WebhookOutcome { kMutated, kUnchanged, kInvalid, kDenied };

struct WebhookReply {
  HttpReply http;
  WebhookOutcome outcome = WebhookOutcome::kInvalid;
  std::string pod;  // "namespace/name" (or "namespace/generateName*"), for the log
  std::string why;  // kUnchanged: why no patch; kInvalid, kDenied: what is wrong
};

// Whether any container or initContainer of `pod` (a Pod object) requests or limits
// `resource` with a quantity above zero. Quantities that do not parse count as zero (the API
// server refuses such a pod in validation, after the webhooks).
bool PodRequestsResource(const nlohmann::json& pod, std::string_view resource);

// The answer to one AdmissionReview request body.
WebhookReply MutatePods(std::string_view body, const WebhookOptions& options);

}  // namespace gpushare::scheduler
