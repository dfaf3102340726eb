// A small linear-program solver for the engine's allocation policies (Gavel's, gavel.h): the
// simplex method on a dense tableau. Programs here have tens of variables and rows (one per class
// of interchangeable jobs and per GPU model), so density costs nothing and keeps it short.
#pragma once

#include <cstddef>
#include <vector>

namespace arbiter::engine {

// maximise objective . x subject to rows x <= bounds and x >= 0, where every bound is >= 0 (so
// x = 0 is feasible and no first phase is needed).
struct LinearProgram {
  std::size_t variables = 0;
  std::vector<double> objective;          // one coefficient per variable
  std::vector<std::vector<double>> rows;  // each `variables` long
  std::vector<double> bounds;             // one per row, >= 0

  explicit LinearProgram(std::size_t n) : variables(n), objective(n, 0.0) {}
  // A row of zeros bounded by `bound`, for the caller to fill.
  std::vector<double>& AddRow(double bound) {
    rows.emplace_back(variables, 0.0);
    bounds.push_back(bound);
    return rows.back();
  }
};

// An optimal x (`variables` long). Dantzig's rule picks the pivots, Bland's after a run of
// degenerate ones (bounds of 0), so the method cannot cycle; the result is deterministic. A program
// that is unbounded, or that needs more than `max_pivots` pivots, gives the last basic feasible
// solution reached (every solution the method passes through is feasible).
std::vector<double> Maximize(const LinearProgram& lp, std::size_t max_pivots = 100000);

}  // namespace arbiter::engine
