"""Arbiter from Python: the simulator, the fill experiment and one planning cycle, run by the same
C++ code as ``arbiter sim``, ``arbiter fill`` and ``arbiter plan`` (the extension module
``arbiter._arbiter``), with results as plain dicts and lists, and as pandas frames when pandas is
installed; and a client for the server's REST API (``arbiter.client``). docs/python.md is the
reference.

    import arbiter
    result = arbiter.simulate("scenarios/mixed-cluster.yaml")
    arbiter.summary_frame(result)
"""

import csv
import io
import json
import os

try:
    from ._arbiter import Error
except ImportError as _missing:  # the REST client (arbiter.client) works without the extension
    _MISSING = _missing

    class Error(ValueError):
        pass

else:
    _MISSING = None

__all__ = [
    "Error",
    "simulate",
    "plan",
    "fill",
    "runs_frame",
    "groups_frame",
    "summary_frame",
    "fill_frame",
    "plan_frames",
]

# Error: a ValueError raised for bad input, with the message the command would print, `field`
# (the path of the field at fault, "" when no one field is) and `code` (invalid_argument,
# not_found, ...).
Error.__doc__ = (
    "Bad input: the message names the file or field and the problem; `field` is the field's "
    "path (empty when no one field is at fault) and `code` the error's kind."
)


def _source(value, what):
    """(text or path, is_text) for a path, or for a dict or list written as YAML (JSON is YAML)."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, indent=1), True
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value), False
    raise TypeError(f"{what}: a file's path or a dict, got {type(value).__name__}")


def simulate(scenario, runs=None, seed=None, base_dir=None):
    """Runs a simulation scenario, as ``arbiter sim SCENARIO --json``.

    scenario: a scenario file's path, or a dict holding what the YAML file holds
    (docs/simulator.md). runs: the names of the configurations to run (default: all).
    seed: replaces the scenario's seed. base_dir: where a dict's trace files are found
    (default: the current folder; a file's are found next to it).

    Returns the JSON report as a dict: {"scenario": NAME, "runs": [{"name", "metrics",
    "queues", "classes", "workloads", "services", "gpu_types", ...}]}, the keys of
    docs/simulator.md. Configurations run in parallel threads, without the interpreter's lock.
    """
    text, is_text = _source(scenario, "scenario")
    if runs is not None and isinstance(runs, str):
        runs = [runs]
    out = _arbiter_call(
        "simulate",
        text,
        is_text,
        "scenario",
        os.fspath(base_dir) if base_dir is not None else os.getcwd(),
        list(runs or []),
        seed,
    )
    return json.loads(out)


def plan(cluster, jobs, now_ms=None):
    """One scheduling cycle, as ``arbiter plan --config CLUSTER --jobs JOBS --json``.

    cluster: a cluster file's path or a dict (docs/configuration.md). jobs: a jobs file's path,
    a dict {"jobs": [...]} or a list of job dicts. now_ms: the cycle's time (default: the latest
    submit time).

    Returns {"now_ms", "binds": [{"job", "name", "gpu_type", "tasks": [{"group", "index",
    "node", "devices": [{"device", "milli_gpu"}]}]}], "unplaced": [{"job", "name", "stage",
    "cause", "verdict", "nodes_total", "node_counts", "detail", "message"}]}.
    """
    if isinstance(jobs, list):
        jobs = {"jobs": jobs}
    cluster_text, cluster_is_text = _source(cluster, "cluster")
    jobs_text, jobs_is_text = _source(jobs, "jobs")
    out = _arbiter_call("plan", cluster_text, cluster_is_text, jobs_text, jobs_is_text, now_ms)
    return json.loads(out)


def _csv_text(rows, what):
    """An openb CSV from a path (kept) or from a list of dicts (their keys the header)."""
    if isinstance(rows, (str, os.PathLike)):
        return os.fspath(rows), False
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise TypeError(f"{what}: a CSV file's path or a list of dicts")
    if not rows:
        raise Error(f"{what}: empty list")
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0].keys()), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue(), True


def fill(nodes, pods, policies=None, seeds=10, seed=42, inflate=1.3, variants=(), threads=0):
    """The fill experiment, as ``arbiter fill`` (docs/placement.md).

    nodes, pods: openb node and pod lists: CSV files' paths, or lists of dicts with their
    columns (sn, cpu_milli, memory_mib, gpu, model; name, cpu_milli, memory_mib, num_gpu,
    gpu_milli, gpu_spec, ...). policies: placement policy names (default: all). seeds: runs
    per policy, with seeds seed, seed + 1, ... inflate: total request over capacity.
    variants: e.g. ["gpushare=100"]. threads: runs in parallel (0: one per core).

    Returns {"nodes", "gpus", "pods", "steps": [10, 20, ...], "policies": {NAME: {"alloc_pct":
    [per step], "failed_pods", "frag_pct", "seconds", "runs": [per seed]}}}; a step not
    reached is NaN.
    """
    nodes_text, nodes_is_text = _csv_text(nodes, "nodes")
    pods_text, pods_is_text = _csv_text(pods, "pods")
    if isinstance(policies, str):
        policies = [policies]
    if isinstance(variants, str):
        variants = [variants]
    return _arbiter_call(
        "fill",
        nodes_text,
        nodes_is_text,
        pods_text,
        pods_is_text,
        list(policies or []),
        int(seeds),
        int(seed),
        float(inflate),
        list(variants),
        int(threads),
    )


def _arbiter_call(name, *args):
    if _MISSING is not None:
        raise ImportError(f"arbiter's extension module is not built or installed: {_MISSING}")
    from . import _arbiter

    return getattr(_arbiter, name)(*args)


# ---- pandas frames (when pandas is installed) ----


def _pandas():
    try:
        import pandas
    except ImportError as e:
        raise ImportError(
            "pandas is not installed (Debian: apt install python3-pandas); "
            "the results are plain dicts without it"
        ) from e
    return pandas


def runs_frame(result):
    """One row per run (index: its name), one column per metric of its "metrics"."""
    pd = _pandas()
    rows = {r["name"]: r["metrics"] for r in result["runs"]}
    return pd.DataFrame.from_dict(rows, orient="index")


def groups_frame(result, by="queues"):
    """One row per run and group (index: run, group), one column per metric; `by` is "queues",
    "classes" or "workloads"."""
    pd = _pandas()
    if by not in ("queues", "classes", "workloads"):
        raise ValueError(f"by: one of queues, classes, workloads, got {by!r}")
    rows = {}
    for r in result["runs"]:
        for name, metrics in r[by].items():
            rows[(r["name"], name)] = metrics
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.names = ["run", by[:-1] if by != "classes" else "class"]
    return frame


def _summary_rows(run):
    """(label, value) pairs: the rows of the terminal table of ``arbiter sim``
    (src/report/table.cc) from the JSON report, as numbers in the unit the label names."""
    m = run["metrics"]

    def scaled(v, scale):
        return float("nan") if v is None else v * scale

    hours = run["horizon_s"] / 3600
    rows = [
        ("GPU utilisation (%)", scaled(m["gpu_utilization"], 100)),
        ("GPU allocation (%)", scaled(m["gpu_allocation"], 100)),
    ]
    for s in run["services"]:
        n = s["name"]
        rows += [
            (f"latency P50 {n} (ms)", scaled(s["latency_p50_ms"], 1)),
            (f"latency P99 {n} (ms)", scaled(s["latency_p99_ms"], 1)),
            (f"latency P99 worst hour {n} (ms)", scaled(s["latency_p99_worst_hour_ms"], 1)),
            (f"hours over SLO {n} (of {hours:g})", s["hours_over_slo"]),
            (f"SLO miss {n} (min)", scaled(s["slo_miss_minutes"], 1)),
        ]
    rows += [
        ("training JCT mean (h)", scaled(m["training_jct_mean_s"], 1 / 3600)),
        ("training completion mean (h)", scaled(m["training_completion_s"], 1 / 3600)),
        ("JCT mean (h)", scaled(m["jct_mean_s"], 1 / 3600)),
        ("JCT median (h)", scaled(m["jct_p50_s"], 1 / 3600)),
        ("JCT P95 (h)", scaled(m["jct_p95_s"], 1 / 3600)),
        ("wait mean (h)", scaled(m["wait_mean_s"], 1 / 3600)),
        ("wait median (h)", scaled(m["wait_p50_s"], 1 / 3600)),
        ("wait P95 (h)", scaled(m["wait_p95_s"], 1 / 3600)),
        ("wait P99 (h)", scaled(m["wait_p99_s"], 1 / 3600)),
        ("longest wait (h)", scaled(m["longest_wait_s"], 1 / 3600)),
        ("evictions", m["evictions"]),
        ("failures", m["failures"]),
        ("GPU-hours lost", scaled(m["gpu_hours_lost"], 1)),
        ("jobs completed", m["jobs_completed"]),
        ("jobs submitted", m["jobs_submitted"]),
    ]
    return rows


def summary_frame(result):
    """The headline rows of ``arbiter sim``'s terminal table, one column per run, as numbers in
    the unit each row's label names."""
    pd = _pandas()
    columns = {}
    index = None
    for r in result["runs"]:
        rows = _summary_rows(r)
        columns[r["name"]] = [v for _, v in rows]
        if index is None:
            index = [label for label, _ in rows]
    return pd.DataFrame(columns, index=index)


def fill_frame(result):
    """GPU allocation ratio (%) per policy (rows) and arrived GPU request (columns, % of
    capacity), with the failed pods and fragmentation at 100%."""
    pd = _pandas()
    rows = {}
    for name, p in result["policies"].items():
        row = {f"{s}%": v for s, v in zip(result["steps"], p["alloc_pct"])}
        row["failed"] = p["failed_pods"]
        row["frag@100 (%)"] = p["frag_pct"]
        rows[name] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def plan_frames(result):
    """(binds, unplaced): one row per placed task (job, name, gpu_type, group, index, node,
    gpus) and one per job not placed (job, name, stage, cause, verdict, message)."""
    pd = _pandas()
    binds = []
    for b in result["binds"]:
        for t in b["tasks"]:
            binds.append(
                {
                    "job": b["job"],
                    "name": b["name"],
                    "gpu_type": b["gpu_type"],
                    "group": t["group"],
                    "index": t["index"],
                    "node": t["node"],
                    "gpus": sum(d["milli_gpu"] for d in t["devices"]) / 1000,
                }
            )
    unplaced = [
        {k: u[k] for k in ("job", "name", "stage", "cause", "verdict", "message")}
        for u in result["unplaced"]
    ]
    columns_b = ["job", "name", "gpu_type", "group", "index", "node", "gpus"]
    columns_u = ["job", "name", "stage", "cause", "verdict", "message"]
    return pd.DataFrame(binds, columns=columns_b), pd.DataFrame(unplaced, columns=columns_u)
