#include "core/placement/share_prices.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gpushare::placement {
namespace {

constexpr double kEps = 1e-12;

// maximize c.y subject to A y <= 1, y >= 0 (dense tableau; the origin is feasible).
// Dantzig's rule, switching to Bland's rule if it runs long (degenerate cycling).
std::vector<double> SimplexMax(const std::vector<double>& c,
                               const std::vector<std::vector<double>>& a) {
  const int m = static_cast<int>(a.size());
  const int n = static_cast<int>(c.size());
  const int cols = n + m + 1;
  std::vector<std::vector<double>> t(m + 1, std::vector<double>(cols, 0.0));
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) t[i][j] = a[i][j];
    t[i][n + i] = 1;
    t[i][n + m] = 1;
  }
  for (int j = 0; j < n; ++j) t[m][j] = -c[j];
  std::vector<int> basis(m);
  for (int i = 0; i < m; ++i) basis[i] = n + i;
  for (int iter = 0; iter < 20000; ++iter) {
    const bool bland = iter > 5000;
    int e = -1;
    double best = -kEps;
    for (int j = 0; j < n + m; ++j) {
      if (t[m][j] < best) {
        e = j;
        if (bland) break;
        best = t[m][j];
      }
    }
    if (e < 0) break;
    int l = -1;
    double ratio = 0;
    for (int i = 0; i < m; ++i) {
      if (t[i][e] <= kEps) continue;
      const double r = t[i][n + m] / t[i][e];
      if (l < 0 || r < ratio - kEps || (r < ratio + kEps && basis[i] < basis[l])) {
        ratio = r;
        l = i;
      }
    }
    if (l < 0) break;  // unbounded: impossible with every item in some constraint
    const double p = t[l][e];
    for (double& v : t[l]) v /= p;
    for (int i = 0; i <= m; ++i) {
      if (i == l || t[i][e] == 0) continue;
      const double f = t[i][e];
      for (int j = 0; j < cols; ++j) t[i][j] -= f * t[l][j];
    }
    basis[l] = e;
  }
  std::vector<double> y(n, 0.0);
  for (int i = 0; i < m; ++i)
    if (basis[i] < n) y[basis[i]] = std::max(0.0, t[i][n + m]);
  return y;
}

// Unbounded knapsack over levels 0..levels: best total value per level; optionally the items
// of the best packing of the full capacity.
std::vector<double> Knapsack(const std::vector<int64_t>& item_levels,
                             const std::vector<double>& value, int64_t levels,
                             std::vector<double>* best_pattern) {
  std::vector<double> v(static_cast<size_t>(levels) + 1, 0.0);
  std::vector<int> last(static_cast<size_t>(levels) + 1, -1);
  for (int64_t h = 1; h <= levels; ++h) {
    v[h] = v[h - 1];
    for (size_t i = 0; i < item_levels.size(); ++i) {
      const int64_t s = item_levels[i];
      if (s <= h && v[h - s] + value[i] > v[h] + kEps) {
        v[h] = v[h - s] + value[i];
        last[h] = static_cast<int>(i);
      }
    }
  }
  if (best_pattern) {
    best_pattern->assign(item_levels.size(), 0.0);
    int64_t h = levels;
    while (h > 0) {
      if (last[h] < 0) {
        --h;
        continue;
      }
      (*best_pattern)[last[h]] += 1;
      h -= item_levels[last[h]];
    }
  }
  return v;
}

}  // namespace

int64_t SharePrices::Level(int64_t units, bool round_up) const {
  if (units <= 0) return 0;
  return round_up ? (units + step_ - 1) / step_ : units / step_;
}

SharePrices SharePrices::Solve(int64_t capacity, const std::vector<int64_t>& sizes,
                               const std::vector<double>& counts) {
  SharePrices p;
  if (capacity <= 0) return p;
  p.capacity_ = capacity;
  std::vector<double> n;
  int64_t g = capacity;
  for (size_t i = 0; i < sizes.size() && i < counts.size(); ++i) {
    if (sizes[i] <= 0 || sizes[i] > capacity || counts[i] <= 0) continue;
    p.sizes_.push_back(sizes[i]);
    n.push_back(counts[i]);
    g = std::gcd(g, sizes[i]);
  }
  p.step_ = std::max<int64_t>(1, g);
  if (capacity / p.step_ > kMaxLevels) p.step_ = (capacity + kMaxLevels - 1) / kMaxLevels;
  const int64_t levels = capacity / p.step_;
  std::vector<int64_t> item_levels;
  for (int64_t s : p.sizes_) item_levels.push_back(std::max<int64_t>(1, p.Level(s, true)));
  if (p.sizes_.empty()) {
    p.value_.assign(static_cast<size_t>(levels) + 1, 0.0);
    return p;
  }
  // Start with one constraint per item (as many copies as fit), then add violated patterns.
  std::vector<std::vector<double>> rows;
  for (size_t i = 0; i < item_levels.size(); ++i) {
    std::vector<double> r(item_levels.size(), 0.0);
    r[i] = static_cast<double>(levels / item_levels[i]);
    rows.push_back(r);
  }
  std::vector<double> y;
  for (int round = 0; round < 1000; ++round) {
    y = SimplexMax(n, rows);
    std::vector<double> pattern;
    const std::vector<double> v = Knapsack(item_levels, y, levels, &pattern);
    if (v.back() <= 1.0 + 1e-9) break;
    // A pattern the LP already has: the knapsack's value and the simplex's disagree only by
    // rounding (degenerate LPs, e.g. every size seen once), so no new constraint can change
    // the prices. Adding it again would repeat until the round limit, each simplex slower.
    if (std::find(rows.begin(), rows.end(), pattern) != rows.end()) break;
    rows.push_back(pattern);
  }
  p.patterns_ = rows.size();
  p.price_ = y;
  p.value_ = Knapsack(item_levels, y, levels, nullptr);
  for (size_t i = 0; i < n.size(); ++i) p.lp_bins_ += n[i] * y[i];
  return p;
}

double SharePrices::Price(int64_t size) const {
  for (size_t i = 0; i < sizes_.size(); ++i)
    if (sizes_[i] == size) return price_[i];
  return Value(size);
}

double SharePrices::Value(int64_t free_share) const {
  if (value_.empty() || free_share <= 0) return 0;
  const int64_t l =
      std::min<int64_t>(Level(free_share, false), static_cast<int64_t>(value_.size()) - 1);
  return value_[l];
}

double SharePrices::Cost(int64_t size, int64_t free_share) const {
  if (value_.empty()) return 0;
  return std::max(0.0, Value(free_share) - Value(free_share - size) - Price(size));
}

}  // namespace gpushare::placement
