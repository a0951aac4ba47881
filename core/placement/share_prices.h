// SharePrices: what a GPU's free share is worth, from the optimal packing of the observed shares.
//
// Packing sharing pods onto GPUs is bin packing: a GPU is a bin of `capacity` units and every
// sharing pod an item. Given how often each share size occurs in the observed workload, the
// linear relaxation of the optimal packing (the cutting-stock LP: cover every item with as few
// GPUs as possible, each GPU filled with one "pattern" of items) has dual prices y(d): the
// fraction of a GPU an item of size d is worth in an optimal packing. From them,
//   V(h) = the best total price of items that fit into a free share h   (a knapsack),
// and placing an item d into a gap h costs
//   cost(d, h) = V(h) - V(h - d) - y(d)  >= 0,
// which is 0 exactly when the placement is consistent with some optimal packing pattern (e.g.
// a 470 next to another 470, a 320 into the 350 left by a 650) and positive when it spoils a
// gap that better-suited items would have filled (a 320 into the 530 left by a 470). The
// default policy (policy_default.h) uses this cost to choose GPUs.
//
// The LP is solved by constraint generation: a small dense simplex on the dual
// (max sum n_d y_d s.t. sum a_d y_d <= 1 for every pattern a) and an unbounded-knapsack oracle
// that finds the most violated pattern. Sizes are discretised to a step (the gcd of sizes and
// capacity, coarsened so that there are at most kMaxLevels levels; sizes round up).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpushare::placement {

class SharePrices {
 public:
  static constexpr int kMaxLevels = 2048;

  SharePrices() = default;
  // sizes[i] occurs counts[i] times; sizes > capacity are ignored.
  static SharePrices Solve(int64_t capacity, const std::vector<int64_t>& sizes,
                           const std::vector<double>& counts);

  bool empty() const { return value_.empty(); }
  int64_t capacity() const { return capacity_; }
  // The price of an item (in GPUs); sizes not observed are priced at V(size).
  double Price(int64_t size) const;
  // V(h): the value of a free share h (0 for h <= 0; h above capacity counts as capacity).
  double Value(int64_t free_share) const;
  // cost(d, h) as above (0 when empty()).
  double Cost(int64_t size, int64_t free_share) const;
  // The LP's optimum: GPUs needed by the observed items (fractional).
  double lp_bins() const { return lp_bins_; }
  // Patterns (constraints) the solve ended with: the initial one per size plus those generated.
  size_t patterns() const { return patterns_; }

 private:
  int64_t Level(int64_t units, bool round_up) const;
  int64_t capacity_ = 0;
  int64_t step_ = 1;
  std::vector<int64_t> sizes_;
  std::vector<double> price_;
  std::vector<double> value_;  // per level 0..capacity/step
  double lp_bins_ = 0;
  size_t patterns_ = 0;
};

}  // namespace gpushare::placement
