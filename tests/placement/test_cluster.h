// Helpers for building small clusters by hand in placement tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/placement/cluster.h"
#include "core/placement/engine.h"
#include "core/placement/pod.h"

namespace gpushare::placement::testing {

inline NodeSpec Node(const std::string& name, int64_t cpu_milli, int gpus,
                     const std::string& model = "G2", int64_t capacity = 1000,
                     int64_t memory_mib = 1 << 20) {
  NodeSpec n;
  n.name = name;
  n.cpu_milli = cpu_milli;
  n.memory_mib = memory_mib;
  n.gpu_model = gpus > 0 ? model : "";
  n.gpu_capacity.assign(static_cast<size_t>(gpus), capacity);
  return n;
}

inline NodeId Add(ClusterState& c, const NodeSpec& n) {
  auto id = c.AddNode(n);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  return id.ok() ? *id : -1;
}

inline PodShape Shape(const ClusterState& c, const PodRequest& r) {
  auto s = CompileShape(r, c);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : PodShape{};
}

// Books `pod` on node n with the best-fit GPUs.
inline void Book(ClusterState& c, NodeId n, const PodRequest& r) {
  PodShape s = Shape(c, r);
  GpuAssignment a;
  ASSERT_TRUE(BestFitAssignment(c.node(n), s, &a)) << s.ToString();
  auto id = c.Commit(s.resources(), n, a);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
}

// Books a share of `share` on GPU g of node n.
inline void BookShare(ClusterState& c, NodeId n, int g, int64_t share, int64_t cpu = 0) {
  PodShape s = Shape(c, MakePodRequest(cpu, 0, 1, share));
  GpuAssignment a;
  a.Add(g);
  auto id = c.Commit(s.resources(), n, a);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
}

}  // namespace gpushare::placement::testing
