// The simplex method on a dense tableau (linear_program.h).
#include "core/engine/linear_program.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace arbiter::engine {

namespace {
constexpr double kEpsilon = 1e-9;
// Degenerate pivots in a row after which Bland's rule takes over.
constexpr std::size_t kDegenerateRun = 64;
}  // namespace

std::vector<double> Maximize(const LinearProgram& lp, std::size_t max_pivots) {
  const std::size_t n = lp.variables;
  const std::size_t m = lp.rows.size();
  const std::size_t width = n + m + 1;  // the variables, one slack per row, the right-hand side
  // Row 0..m-1: the constraints; row m: the reduced costs (-objective to start).
  std::vector<double> t((m + 1) * width, 0.0);
  auto at = [&](std::size_t r, std::size_t c) -> double& { return t[r * width + c]; };
  std::vector<std::size_t> basis(m);
  for (std::size_t r = 0; r < m; ++r) {
    for (std::size_t c = 0; c < n; ++c) at(r, c) = lp.rows[r][c];
    at(r, n + r) = 1.0;
    at(r, width - 1) = lp.bounds[r];
    basis[r] = n + r;
  }
  for (std::size_t c = 0; c < n; ++c) at(m, c) = -lp.objective[c];

  // Dantzig's rule (the column of the most negative reduced cost) needs the fewest pivots in
  // practice but may cycle on degenerate pivots; after a run of them, Bland's rule (the first
  // improving column), which cannot. The leaving row: the least ratio, ties to the lowest basic
  // variable.
  bool bland = false;
  std::size_t degenerate = 0;
  std::vector<std::size_t> nonzero;
  for (std::size_t pivots = 0; pivots < max_pivots; ++pivots) {
    std::size_t enter = width;
    double most = -kEpsilon;
    for (std::size_t c = 0; c + 1 < width; ++c) {
      if (at(m, c) < most) {
        enter = c;
        if (bland) break;
        most = at(m, c);
      }
    }
    if (enter == width) break;  // optimal
    std::size_t leave = m;
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t r = 0; r < m; ++r) {
      const double a = at(r, enter);
      if (a <= kEpsilon) continue;
      const double ratio = at(r, width - 1) / a;
      if (ratio < best - kEpsilon ||
          (ratio <= best + kEpsilon && leave < m && basis[r] < basis[leave])) {
        best = ratio;
        leave = r;
      }
    }
    if (leave == m) break;  // unbounded along this column
    degenerate = best <= kEpsilon ? degenerate + 1 : 0;
    if (degenerate > kDegenerateRun) bland = true;
    // (The pivot row's nonzero columns only: the programs here are sparse.)
    const double p = at(leave, enter);
    nonzero.clear();
    for (std::size_t c = 0; c < width; ++c) {
      if (at(leave, c) == 0.0) continue;
      at(leave, c) /= p;
      nonzero.push_back(c);
    }
    for (std::size_t r = 0; r <= m; ++r) {
      if (r == leave) continue;
      const double f = at(r, enter);
      if (f == 0.0) continue;
      for (std::size_t c : nonzero) at(r, c) -= f * at(leave, c);
    }
    basis[leave] = enter;
  }
  std::vector<double> x(n, 0.0);
  for (std::size_t r = 0; r < m; ++r) {
    if (basis[r] < n) x[basis[r]] = std::max(0.0, at(r, width - 1));
  }
  return x;
}

}  // namespace arbiter::engine
