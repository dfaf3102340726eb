"""A real `arbiter server` for the API's command-level tests (tests/api): started on a free
loopback port with a configuration written to a temporary directory, stopped at the end, and
a small HTTP client for it. Python's standard library only."""

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body  # bytes

    @property
    def content_type(self):
        return (self.headers.get("Content-Type") or "").split(";")[0].strip()

    def json(self):
        return json.loads(self.body)

    def text(self):
        return self.body.decode("utf-8")


class Server:
    """`arbiter server --dev --config CONFIG --data DIR --listen 127.0.0.1:0 EXTRA...`."""

    def __init__(self, arbiter, config_yaml, extra=()):
        self.dir = tempfile.mkdtemp(prefix="arbiter-api-test-")
        config = os.path.join(self.dir, "cluster.yaml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(config_yaml)
        self.process = subprocess.Popen(
            [arbiter, "server", "--dev", "--check-invariants", "--config", config, "--data",
             os.path.join(self.dir, "data"), "--listen", "127.0.0.1:0", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.port = None
        self.output = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.output.append(line)
            match = re.search(r"listening on http://[^ ]*:(\d+)", line)
            if match:
                self.port = int(match.group(1))
            if "ready" in line and self.port:
                break
        if not self.port:
            self.stop()
            raise RuntimeError("the server did not start:\n" + "".join(self.output))
        # Keep reading its output, so that it never blocks on a full pipe.
        import threading
        threading.Thread(target=self._drain, daemon=True).start()
        while self.request("GET", "/readyz").status != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("the server is not ready")
            time.sleep(0.05)

    def _drain(self):
        for line in self.process.stdout:
            self.output.append(line)

    def request(self, method, path, token=None, body=None, headers=None, timeout=30):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = dict(headers or {})
        if token:
            h["Authorization"] = "Bearer " + token
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            if isinstance(data, str):
                data = data.encode("utf-8")
            h.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        result = Response(r.status, r.headers, r.read())
        conn.close()
        return result

    def wait_for(self, done, what, seconds=60):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if done():
                return
            time.sleep(0.05)
        raise AssertionError("timed out waiting for " + what)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
