#pragma once

namespace arbiter::bench {

// The arbiter command against a real server: an in-process `arbiter server` (durable SQLite
// store in a temporary directory, virtual nodes), and the built `arbiter submit` run as a new
// process for each job, as a user or a script runs it: one client submitting one job after
// another, then 8 at once. Prints BENCH cli_submit_ms (the median wall time of one submit, the
// server's durable commit included), cli_submit_cpu_ms (the client processes' CPU time, user and
// system, per submit), cli_submit_per_s_1 and cli_submit_per_s_8 (submits per wall second with 1
// and 8 clients), and as commentary what starting a trivial program (/bin/true) and the whole
// program (`arbiter-full submit`, what an https server costs) take on this machine.
void RunCliBench(double seconds = 3.0);

}  // namespace arbiter::bench
