#!/usr/bin/env python3
"""/metrics (ctest: api_metrics): a real server on virtual nodes, with a preemption behind it and
a queue whose name holds a quote, a backslash and other odd characters.

1. `promtool check metrics` accepts the text (format and Prometheus' naming conventions).
2. Every metric of docs/metrics.md is served (with the type the reference gives), and every
   metric served is in docs/metrics.md.
3. The odd queue's name comes back escaped as the text format says (\\" and \\\\).
4. Every metric the Grafana dashboard (deploy/grafana/arbiter.json) queries is served.

    python3 tests/api/metrics_test.py --arbiter build/arbiter [--source .] [--promtool promtool]
"""

import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from arbiter_server import Server  # noqa: E402

ADMIN = "admin-token-0001"
ODD = 'odd "q\\ {x}=,y'  # a quote, a backslash, braces, '=' and ','

CONFIG = """
priority_classes:
  - {name: high, value: 100, preemptible: false}
  - {name: low, value: 10, grace_period: 100ms}
queues:
  - {name: org}
  - {name: main, parent: org, quota: {G: {nominal: 8, borrowing_limit: 2, lending_limit: 2, max: 8}}}
  - {name: 'odd "q\\ {x}=,y', parent: org}
nodes:
  - name: g-{i}
    count: 2
    gpus: {model: G, count: 4, memory: 40Gi}
    cpu: 32
    memory: 256Gi
server:
  tokens:
    - {name: admin, token: admin-token-0001, role: admin}
  cycle_min_interval: 20ms
  cycle_period: 200ms
"""


def job(name, queue, cls, gpus, runtime_ms):
    return {"name": name, "queue": queue, "priority_class": cls, "runtime_estimate_ms": runtime_ms,
            "groups": [{"tasks": 1, "gpu_milli": gpus * 1000}]}


def families(text):
    """{name: type} of the text's TYPE lines, and the sample names."""
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    samples = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", text, re.M))
    return types, samples


def documented(source):
    """{name: type} of the reference's table (docs/metrics.md): `| `name` | type | ...`."""
    with open(os.path.join(source, "docs/metrics.md"), encoding="utf-8") as f:
        rows = re.findall(r"^\| `(arbiter_[a-z0-9_]+)` \| (counter|gauge|histogram) \|", f.read(),
                          re.M)
    return dict(rows)


def dashboard_metrics(source):
    with open(os.path.join(source, "deploy/grafana/arbiter.json"), encoding="utf-8") as f:
        board = json.load(f)
    exprs = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("expr", "query") and isinstance(v, str):
                    exprs.append(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(board)
    names = set()
    for e in exprs:
        # A name, not a prefix in a regular expression (arbiter_queue_.*).
        names.update(n for n in re.findall(r"\barbiter_[a-z0-9_]+", e) if not n.endswith("_"))
    return names, len(exprs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arbiter", required=True)
    parser.add_argument("--source", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    parser.add_argument("--promtool", default="promtool")
    args = parser.parse_args()
    failures = []

    with Server(args.arbiter, CONFIG, ["--virtual-nodes"]) as server:
        def submit(spec):
            r = server.request("POST", "/v1/jobs", ADMIN, spec)
            assert r.status == 201, r.text()
            return r.json()["id"]

        def state(i):
            return server.request("GET", f"/v1/jobs/{i}", ADMIN).json()["status"]["state"]
        # Low fills the cluster; high evicts one of them; a job waits for room, and so does one
        # of the odd queue.
        low = [submit(job(f"low-{i}", "main", "low", 4, 600000)) for i in range(2)]
        server.wait_for(lambda: all(state(i) == "running" for i in low), "low running")
        high = submit(job("high", "main", "high", 4, 600000))
        server.wait_for(lambda: state(high) == "running", "high running (after an eviction)")
        waiting = submit(job("waiting", "main", "low", 4, 1000))
        odd = submit(job("odd", ODD, "low", 1, 50))
        server.wait_for(lambda: state(waiting) == "pending" and state(odd) == "pending",
                        "waiting jobs")
        server.wait_for(lambda: "arbiter_evicted_jobs_total{" in
                        server.request("GET", "/metrics").text(), "an eviction counted")
        r = server.request("GET", "/metrics")
        text = r.text()

    if r.headers.get("Content-Type", "").split(";")[0] != "text/plain":
        failures.append(f"/metrics: content type {r.headers.get('Content-Type')!r}")

    # 1. promtool.
    check = subprocess.run([args.promtool, "check", "metrics"], input=text, text=True,
                           capture_output=True)
    if check.returncode != 0 or check.stdout.strip() or check.stderr.strip():
        failures.append("promtool check metrics: " + (check.stdout + check.stderr).strip())

    # 2. The reference and the server agree.
    types, samples = families(text)
    reference = documented(args.source)
    if len(reference) < 20:
        failures.append(f"docs/metrics.md: only {len(reference)} metrics read from its table")
    for name, kind in sorted(reference.items()):
        if name not in types:
            failures.append(f"{name} (docs/metrics.md) is not served")
        elif types[name] != kind:
            failures.append(f"{name}: served as a {types[name]}, docs/metrics.md says {kind}")
    for name in sorted(set(types) - set(reference)):
        failures.append(f"{name} is served and not in docs/metrics.md")

    # 3. Escaping: the odd queue's name, as the text format escapes it.
    escaped = ODD.replace("\\", "\\\\").replace('"', '\\"')
    line = f'arbiter_queue_held_jobs{{queue="{escaped}"}} 0'
    if line not in text.splitlines():
        failures.append(f"not served: {line}")

    # 4. The dashboard's metrics.
    names, count = dashboard_metrics(args.source)
    if count < 10:
        failures.append(f"deploy/grafana/arbiter.json: only {count} queries")
    for name in sorted(names):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name not in samples and base not in types:
            failures.append(f"deploy/grafana/arbiter.json queries {name}, which is not served")

    for f in failures:
        print("FAIL: " + f)
    if failures:
        print(text)
        return 1
    print(f"metrics: {len(types)} families, promtool clean, {len(names)} dashboard metrics served")
    return 0


if __name__ == "__main__":
    sys.exit(main())
