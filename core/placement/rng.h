// Rng: a small deterministic pseudo-random generator (xoshiro256**, seeded through splitmix64).
//
// Placement must be reproducible across platforms and standard libraries: std::mt19937 is
// portable but std::uniform_int_distribution and std::shuffle are not (each library maps the
// raw stream differently). Everything in the engine and the simulator that needs randomness
// takes an Rng& explicitly; nothing reads global random state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace gpushare::placement {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { Seed(seed); }

  void Seed(uint64_t seed);

  // The next raw 64-bit value.
  uint64_t Next();

  // Uniform integer in [0, n) without modulo bias (Lemire's method). n must be > 0.
  uint64_t Uniform(uint64_t n);

  // Uniform double in [0, 1).
  double UniformDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Fisher-Yates shuffle of v (last element first, like Go's rand.Shuffle).
  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) {
      size_t j = static_cast<size_t>(Uniform(i));
      using std::swap;
      swap(v[i - 1], v[j]);
    }
  }

  // A uniformly random permutation of 0..n-1.
  std::vector<int> Permutation(int n);

 private:
  uint64_t s_[4];
};

}  // namespace gpushare::placement
