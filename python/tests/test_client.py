"""arbiter.client against a real server: `arbiter server --dev` on the example cluster with
virtual nodes, on a free loopback port, stopped at the end. ARBITER_BINARY names the command,
ARBITER_SOURCE_DIR the repository."""

import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request

from arbiter.client import ApiError, Client

SOURCE = os.environ.get("ARBITER_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("ARBITER_BINARY", os.path.join(SOURCE, "build", "arbiter"))
STAGES = r"^(quota|filter|place|validate|reserved)"
DEADLINE = 60  # seconds: generous, the tests run on loaded machines


class Server:
    """`arbiter server` on the example cluster, in a temporary data folder."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="arbiter-py-")
        self.process = subprocess.Popen(
            [BINARY, "server", "--config", os.path.join(SOURCE, "examples", "cluster.yaml"),
             "--data", os.path.join(self.dir, "data"), "--listen", "127.0.0.1:0", "--dev",
             "--virtual-nodes"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.url = None
        end = time.monotonic() + DEADLINE
        for line in self.process.stdout:
            m = re.search(r"listening on (https?://[^\s]+:\d+)", line)
            if m:
                self.url = m.group(1)
                break
            if time.monotonic() > end:
                break
        if not self.url:
            self.stop()
            raise RuntimeError("the server did not start")
        # Keep reading its output so that it never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in self.process.stdout], daemon=True).start()
        while time.monotonic() < end:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("the server did not become ready")

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def small_job(name, gpus=1000):
    return {"name": name, "queue": "training", "priority_class": "P1",
            "argv": ["sleep", "1000"], "groups": [{"tasks": 1, "gpu_milli": gpus}]}


def wait_for(done):
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        value = done()
        if value:
            return value
        time.sleep(0.1)
    return None


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()
        cls.alice = Client(cls.server.url, token="example-alice-token")
        cls.admin = Client(cls.server.url, token="example-admin-token")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_submit_list_explain(self):
        answer = self.alice.submit(small_job("py-one"))
        self.assertEqual(answer["name"], "py-one")
        self.assertFalse(answer["duplicate"])
        job_id = answer["id"]

        listed = self.alice.jobs()
        self.assertIn(job_id, [j["id"] for j in listed])
        mine = [j for j in listed if j["id"] == job_id][0]
        self.assertEqual(mine["spec"]["user"], "alice")
        self.assertEqual(mine["spec"]["queue"], "training")

        # The virtual nodes run it once a cycle has placed it: explain says where.
        running = wait_for(lambda: (lambda e: e if e["state"] == "running" else None)(
            self.alice.explain(job_id)))
        self.assertIsNotNone(running, "the job never ran")
        self.assertEqual(running["name"], "py-one")
        self.assertTrue(running["tasks"])
        self.assertIn(job_id, [j["id"] for j in self.alice.jobs(state="running")])
        self.assertIn(job_id, [j["id"] for j in self.alice.jobs(state=["pending", "running"])])
        self.assertNotIn(job_id, [j["id"] for j in self.alice.jobs(state="completed")])

    def test_explain_pending(self):
        # Larger than every free H800 node once the others run: 8 whole H800 GPUs on one node
        # in the batch queue with best-effort priority, many times over: some wait, with reasons.
        ids = []
        for i in range(12):
            spec = small_job(f"py-wide-{i}", gpus=8000)
            spec["queue"] = "batch"
            spec["priority_class"] = "P2"
            spec["gpu_types"] = ["H800"]
            ids.append(self.alice.submit(spec)["id"])

        # Before its first cycle a job's reason says it waits for one; after it, the stage that
        # said no.
        def a_pending_reason():
            for i in ids:
                e = self.alice.explain(i)
                if e["state"] == "pending" and re.match(STAGES, e["reason"] or ""):
                    return e
            return None

        pending = wait_for(a_pending_reason)
        self.assertIsNotNone(pending, "no job waits with a reason")
        self.assertIn(pending["verdict"], ("wait", "never"))
        for i in ids:
            self.admin.cancel(i)

    def test_errors_name_the_field(self):
        spec = small_job("py-bad", gpus=1500)
        with self.assertRaises(ApiError) as caught:
            self.alice.submit(spec)
        e = caught.exception
        self.assertEqual(e.status, 400)
        self.assertEqual(e.code, "invalid_argument")
        self.assertEqual(e.field, "groups[0].gpu_milli")
        self.assertIn("groups[0].gpu_milli", str(e))

        with self.assertRaises(ApiError) as caught:
            Client(self.server.url, token="not-a-token").jobs()
        self.assertEqual(caught.exception.status, 401)
        self.assertEqual(caught.exception.code, "unauthenticated")

        with self.assertRaises(ApiError) as caught:
            self.alice.job(999999)
        self.assertEqual(caught.exception.status, 404)

        with self.assertRaises(ApiError) as caught:
            Client("http://127.0.0.1:1", token="x", timeout=5).jobs()
        self.assertEqual(caught.exception.status, 0)

    def test_watch(self):
        job_id = self.alice.submit(small_job("py-watched"))["id"]
        seen = []
        for event in self.alice.watch(cursor=0, job=job_id):
            seen.append(event["kind"])
            if event["kind"] == "started":
                break
        self.assertEqual(seen[0], "submitted")
        self.assertIn("started", seen)
        # From a cursor: only what follows it.
        self.alice.cancel(job_id)
        page = self.alice.events(cursor=0, job=job_id)
        kinds = [e["kind"] for e in page["events"]]
        self.assertEqual(kinds[0], "submitted")
        last = page["events"][-1]["seq"]
        cancelled = next(self.alice.watch(cursor=last - 1, kinds="cancelled", job=job_id))
        self.assertEqual(cancelled["job"], job_id)


if __name__ == "__main__":
    unittest.main()
