#!/usr/bin/env python3
"""Placement across families of workloads: the fill experiment (`arbiter fill`) on openb's node
list with workloads derived from openb's pod list by the published variants' method
(`--variant`, src/sim/fill.h), over a grid of each kind and mixes of them. For each
workload and seed it records the GPU allocation (%) when the arrived request reaches 100% of the
cluster's GPUs, and prints a Markdown table: the default (`arbiter`), FGD, the best other
policy, and the default's lead over FGD with its noise (two standard errors of the mean of the
per-seed differences, the seeds being paired: the same arrival order for every policy).

    scripts/placement-families.py --arbiter build/arbiter [--seeds 5] [--json out.json]
        [--first-seed 42] [--policies arbiter,fgd] [--jobs 2] [--nodes CSV] [--pods CSV]

docs/placement.md shows its output. Standard library only.
"""
import argparse
import concurrent.futures
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODES = os.path.join(ROOT, "data/traces/openb/openb_node_list_gpu_node.csv")
PODS = os.path.join(ROOT, "data/traces/openb/openb_pod_list_default.csv")
POLICIES = ["arbiter", "fgd", "best-fit", "packing", "clustering", "dot-product", "random"]


def families():
    """Each workload: (name, [variant, ...]) with the variants applied in order."""
    out = [("openb default", [])]
    out += [(f"multigpu={p}", [f"multigpu={p}"]) for p in range(10, 81, 10)]
    out += [(f"gpushare={p}", [f"gpushare={p}"]) for p in range(20, 101, 20)]
    out += [(f"gpuspec={p}", [f"gpuspec={p}"]) for p in range(10, 51, 10)]
    mixes = [
        ["multigpu=30", "gpushare=50"],
        ["multigpu=50", "gpushare=80"],
        ["multigpu=30", "gpuspec=30"],
        ["multigpu=60", "gpuspec=50"],
        ["gpushare=60", "gpuspec=30"],
        ["gpushare=100", "gpuspec=50"],
        ["multigpu=20", "gpushare=40", "gpuspec=20"],
        ["multigpu=40", "gpushare=60", "gpuspec=40"],
    ]
    out += [(" + ".join(m), m) for m in mixes]
    return out


def run(arbiter, nodes, pods, variants, seed, policies):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [arbiter, "fill", "--nodes", nodes, "--pods", pods, "--seeds", "1", "--seed",
               str(seed), "--threads", "1", "--quiet", "--json", out.name]
        for v in variants:
            cmd += ["--variant", v]
        for p in policies:
            cmd += ["--placement", p]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        result = json.load(open(out.name))
    return {p: result["policies"][p]["alloc_pct"]["100"] for p in policies}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arbiter", default=os.path.join(ROOT, "build/arbiter"))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=42)
    parser.add_argument("--json", help="write every per-seed figure here")
    parser.add_argument("--only", help="run only the workloads whose name contains this")
    parser.add_argument("--policies", default=",".join(POLICIES),
                        help="comma-separated; arbiter and fgd are always run")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once")
    parser.add_argument("--nodes", default=NODES, help="openb node list (CSV)")
    parser.add_argument("--pods", default=PODS, help="openb pod list (CSV)")
    args = parser.parse_args()
    policies = ["arbiter", "fgd"] + [p for p in args.policies.split(",")
                                     if p and p not in ("arbiter", "fgd")]

    workloads = [(name, variants) for name, variants in families()
                 if not args.only or args.only in name]
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        runs = {(name, i): pool.submit(run, args.arbiter, args.nodes, args.pods, variants,
                                       args.first_seed + i, policies)
                for name, variants in workloads for i in range(args.seeds)}
    rows, raw = [], {}
    for name, _ in workloads:
        per_seed = [runs[(name, i)].result() for i in range(args.seeds)]
        raw[name] = per_seed
        mean = {p: statistics.fmean(s[p] for s in per_seed) for p in policies}
        diffs = [s["arbiter"] - s["fgd"] for s in per_seed]
        lead = statistics.fmean(diffs)
        noise = 2 * statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else 0.0
        others = [p for p in policies if p not in ("arbiter", "fgd")]
        best = max(others, key=lambda p: mean[p]) if others else None
        verdict = "ahead" if lead > noise else ("behind" if lead < -noise else "even")
        rows.append((name, mean["arbiter"], mean["fgd"], best, mean[best] if best else 0.0,
                     lead, noise, min(diffs), verdict))
        print(f"{name}: arbiter {mean['arbiter']:.2f} fgd {mean['fgd']:.2f} "
              f"lead {lead:+.2f} +- {noise:.2f}", file=sys.stderr, flush=True)

    print(f"| workload | `arbiter` (default) | `fgd` | best other | default - FGD "
          f"(+- 2 SE) | worst seed | |")
    print("|---|---|---|---|---|---|---|")
    for name, a, f, best, b, lead, noise, worst, verdict in rows:
        other = f"{best} {b:.2f}" if best else "-"
        print(f"| {name} | {a:.2f} | {f:.2f} | {other} | {lead:+.2f} +- {noise:.2f} | "
              f"{worst:+.2f} | {verdict} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
