"""arbiter (the extension module and its Python layer) against the arbiter command: the same
scenario gives the same numbers; the fill experiment; plans from files and from dicts; bad input
raises arbiter.Error naming the field; pandas frames when pandas is installed. ARBITER_BINARY
names the command, ARBITER_SOURCE_DIR the repository."""

import copy
import csv
import json
import math
import os
import subprocess
import threading
import unittest

import arbiter

SOURCE = os.environ.get("ARBITER_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("ARBITER_BINARY", os.path.join(SOURCE, "build", "arbiter"))
STORM = os.path.join(SOURCE, "scenarios", "preemption-storm.yaml")
CLUSTER = os.path.join(SOURCE, "examples", "cluster.yaml")
JOBS = os.path.join(SOURCE, "examples", "jobs.yaml")
OPENB_NODES = os.path.join(SOURCE, "data", "traces", "openb", "openb_node_list_gpu_node.csv")
OPENB_PODS = os.path.join(SOURCE, "data", "traces", "openb", "openb_pod_list_variant_columns.csv")

try:
    import pandas
except ImportError:
    pandas = None


def command(*args):
    return subprocess.run([BINARY, *args], check=True, capture_output=True, text=True).stdout


# The storm scenario as a dict, written out here (the YAML file's content), so that the test needs
# no YAML reader.
def storm_dict():
    node = {"name": "gpu-{i}", "count": 4, "cpu": 128, "memory": "1Ti",
            "gpus": {"model": "H800", "count": 8, "memory": "80Gi", "nvlink_group_size": 8}}
    return {
        "name": "storm-from-python",
        "seed": 3,
        "horizon": "1d",
        "cycle": {"min_interval": "1s", "period": "30s"},
        "cluster": {"nodes": [node],
                    "priority_classes": [{"name": "critical", "value": 1000},
                                         {"name": "high", "value": 900}],
                    "queues": [{"name": "shared"}]},
        "workloads": [
            {"name": "tasks", "kind": "batch", "arrivals": {"per_hour": 60},
             "work": {"uniform": ["5m", "15m"]},
             "job": {"gpus": 1, "cpu": 8, "memory": "64Gi"}},
            {"name": "training", "kind": "training", "arrivals": {"at": ["0s"]}, "work": "20h",
             "job": {"gpus": 8, "cpu": 96, "memory": "1Ti", "checkpoint_interval": "1h"}},
        ],
        "configurations": [
            {"name": "one", "assign": {"tasks": {"queue": "shared", "priority_class": "critical"},
                                       "training": {"queue": "shared", "priority_class": "high"}}},
        ],
    }


class SimulateTest(unittest.TestCase):
    def test_same_numbers_as_the_command(self):
        from_command = json.loads(command("sim", STORM, "--json", "-", "--quiet"))
        from_python = arbiter.simulate(STORM)
        self.assertEqual(from_python, from_command)
        self.assertEqual([r["name"] for r in from_python["runs"]], ["incident", "fix"])

    def test_runs_and_seed(self):
        fix = arbiter.simulate(STORM, runs=["fix"], seed=7)
        self.assertEqual([r["name"] for r in fix["runs"]], ["fix"])
        self.assertEqual(fix, json.loads(command("sim", STORM, "--run", "fix", "--seed", "7",
                                                 "--json", "-", "--quiet")))

    def test_from_a_dict(self):
        result = arbiter.simulate(storm_dict())
        self.assertEqual(result["scenario"], "storm-from-python")
        run = result["runs"][0]
        self.assertEqual(run["name"], "one")
        self.assertEqual(run["horizon_s"], 86400)
        self.assertGreater(run["metrics"]["jobs_completed"], 0)
        # Deterministic: the same dict, the same numbers.
        self.assertEqual(arbiter.simulate(storm_dict()), result)

    def test_threads_run_at_once(self):
        # The interpreter's lock is released while the C++ code runs: two calls from two threads
        # both finish, with the numbers of one call alone.
        alone = arbiter.simulate(storm_dict())
        results = [None, None]

        def run(i):
            results[i] = arbiter.simulate(storm_dict())

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results, [alone, alone])

    def test_bad_input_names_the_field(self):
        bad = storm_dict()
        bad["workloads"][0]["job"]["gpus"] = "many"
        with self.assertRaises(arbiter.Error) as caught:
            arbiter.simulate(bad)
        self.assertIn("workloads[0].job.gpus", str(caught.exception))
        self.assertIsInstance(caught.exception, ValueError)

        with self.assertRaises(arbiter.Error) as caught:
            arbiter.simulate(STORM, runs=["nope"])
        self.assertIn("unknown configuration 'nope' (known: incident, fix)", str(caught.exception))

        with self.assertRaises(arbiter.Error) as caught:
            arbiter.simulate(os.path.join(SOURCE, "no-such-scenario.yaml"))
        self.assertIn("no-such-scenario.yaml", str(caught.exception))

        with self.assertRaises(TypeError):
            arbiter.simulate(42)


class FillTest(unittest.TestCase):
    def test_same_numbers_as_the_command(self):
        out = command("fill", "--nodes", OPENB_NODES, "--pods", OPENB_PODS, "--seeds", "2",
                      "--placement", "best-fit", "--placement", "dot-product", "--quiet",
                      "--json", "-")
        from_command = json.loads(out[out.index('{"policies"'):])["policies"]
        result = arbiter.fill(OPENB_NODES, OPENB_PODS, policies=["best-fit", "dot-product"],
                              seeds=2)
        self.assertEqual(list(result["policies"]), ["best-fit", "dot-product"])
        self.assertEqual(result["steps"][0], 10)
        self.assertEqual(result["nodes"], 1213)
        for name, p in result["policies"].items():
            self.assertEqual(len(p["runs"]), 2)
            self.assertEqual([r["seed"] for r in p["runs"]], [42, 43])
            self.assertAlmostEqual(p["failed_pods"], from_command[name]["failed_pods"])
            for step, v in zip(result["steps"], p["alloc_pct"]):
                expected = from_command[name]["alloc_pct"][str(step)]
                if expected is None:
                    self.assertTrue(math.isnan(v))
                else:
                    self.assertAlmostEqual(v, expected, delta=0.0051)  # written to 2 places

    def test_from_lists_of_dicts(self):
        with open(OPENB_NODES) as f:
            nodes = list(csv.DictReader(f))
        with open(OPENB_PODS) as f:
            pods = list(csv.DictReader(f))
        from_rows = arbiter.fill(nodes, pods, policies="best-fit", seeds=1)
        from_files = arbiter.fill(OPENB_NODES, OPENB_PODS, policies="best-fit", seeds=1)
        strip = lambda r: {k: v for k, v in r.items() if k != "seconds"}
        a = from_rows["policies"]["best-fit"]
        b = from_files["policies"]["best-fit"]
        self.assertEqual(strip(a) | {"runs": None}, strip(b) | {"runs": None})
        self.assertEqual([strip(r) for r in a["runs"]], [strip(r) for r in b["runs"]])

    def test_bad_input(self):
        with self.assertRaises(arbiter.Error) as caught:
            arbiter.fill(OPENB_NODES, OPENB_PODS, policies=["nope"], seeds=1)
        self.assertEqual(caught.exception.field, "policies")
        self.assertIn("unknown policy 'nope'", str(caught.exception))
        with self.assertRaises(arbiter.Error) as caught:
            arbiter.fill(OPENB_NODES, OPENB_PODS, seeds=0)
        self.assertEqual(caught.exception.field, "seeds")
        with self.assertRaises(arbiter.Error) as caught:
            arbiter.fill([{"sn": "n", "cpu_milli": "x", "memory_mib": 1, "gpu": 1,
                           "model": "V100"}], OPENB_PODS, seeds=1)
        self.assertIn("cpu_milli", str(caught.exception))


# A small cluster and its jobs as dicts: what the YAML files would hold.
def small_cluster():
    return {
        "priority_classes": [{"name": "high", "value": 100}, {"name": "low", "value": 10}],
        "queues": [{"name": "team"}],
        "nodes": [{"name": "n{i}", "count": 2, "cpu": 64, "memory": "512Gi",
                   "gpus": {"model": "A100", "count": 4, "memory": "80Gi"}}],
    }


def small_jobs():
    return [
        {"name": "fits", "queue": "team", "priority_class": "high", "gpus": 4, "cpu": 8,
         "memory": "64Gi"},
        {"name": "gang", "queue": "team", "priority_class": "low", "tasks": 2, "gpus": 2,
         "cpu": 8, "memory": "64Gi"},
        {"name": "too-big", "queue": "team", "priority_class": "low", "gpus": 8, "cpu": 8,
         "memory": "64Gi"},
    ]


class PlanTest(unittest.TestCase):
    def test_same_plan_as_the_command(self):
        from_command = json.loads(command("plan", "--config", CLUSTER, "--jobs", JOBS, "--json"))
        from_python = arbiter.plan(CLUSTER, JOBS)
        self.assertEqual(from_python, from_command)
        placed = {b["name"]: b for b in from_python["binds"]}
        self.assertEqual(placed["llama-70b-pretrain"]["gpu_type"], "H800")
        self.assertEqual(len(placed["llama-70b-pretrain"]["tasks"]), 4)
        unplaced = {u["name"]: u for u in from_python["unplaced"]}
        self.assertEqual(unplaced["moe-giant"]["verdict"], "never")
        self.assertRegex(unplaced["moe-giant"]["message"], r"^filter: 0/19 nodes fit")

    def test_from_dicts(self):
        result = arbiter.plan(small_cluster(), small_jobs())
        self.assertEqual([b["name"] for b in result["binds"]], ["fits", "gang"])
        self.assertEqual({t["node"] for t in result["binds"][1]["tasks"]} <= {"n0", "n1"}, True)
        self.assertEqual(len(result["unplaced"]), 1)
        too_big = result["unplaced"][0]
        self.assertEqual(too_big["name"], "too-big")
        self.assertEqual(too_big["verdict"], "never")
        self.assertEqual(too_big["stage"], "filter")
        # {"jobs": [...]} as the file has it, and a time given.
        again = arbiter.plan(small_cluster(), {"jobs": small_jobs()}, now_ms=60000)
        self.assertEqual(again["now_ms"], 60000)
        self.assertEqual([b["name"] for b in again["binds"]], ["fits", "gang"])

    def test_bad_input_names_the_field(self):
        jobs = small_jobs()
        jobs[1]["queue"] = "nobody"
        with self.assertRaises(arbiter.Error) as caught:
            arbiter.plan(small_cluster(), jobs)
        self.assertIn("jobs[1].queue", str(caught.exception))
        self.assertIn("nobody", str(caught.exception))

        cluster = small_cluster()
        cluster["nodes"][0]["gpus"]["count"] = -1
        with self.assertRaises(arbiter.Error) as caught:
            arbiter.plan(cluster, small_jobs())
        self.assertIn("nodes[0].gpus.count", str(caught.exception))


@unittest.skipIf(pandas is None, "pandas is not installed")
class FramesTest(unittest.TestCase):
    def test_frames(self):
        result = arbiter.simulate(STORM)
        runs = arbiter.runs_frame(result)
        self.assertEqual(list(runs.index), ["incident", "fix"])
        self.assertAlmostEqual(runs.loc["fix", "gpu_utilization"],
                               result["runs"][1]["metrics"]["gpu_utilization"])
        queues = arbiter.groups_frame(result, "queues")
        self.assertIn(("fix", "training"), list(queues.index))
        summary = arbiter.summary_frame(result)
        self.assertEqual(list(summary.columns), ["incident", "fix"])
        self.assertAlmostEqual(summary.loc["GPU utilisation (%)", "fix"],
                               100 * result["runs"][1]["metrics"]["gpu_utilization"])
        self.assertEqual(summary.loc["evictions", "incident"],
                         result["runs"][0]["metrics"]["evictions"])

        filled = arbiter.fill_frame(arbiter.fill(OPENB_NODES, OPENB_PODS, policies="best-fit",
                                                 seeds=1))
        self.assertEqual(list(filled.index), ["best-fit"])
        self.assertIn("100%", filled.columns)

        binds, unplaced = arbiter.plan_frames(arbiter.plan(small_cluster(), small_jobs()))
        self.assertEqual(list(binds["name"]), ["fits", "gang", "gang"])
        self.assertEqual(binds["gpus"].sum(), 8)
        self.assertEqual(list(unplaced["name"]), ["too-big"])


if __name__ == "__main__":
    unittest.main()
