#!/usr/bin/env python3
"""The API contract (ctest: api_contract): docs/openapi.yaml and the server agree.

1. The routes: every route the server registers (src/server/http.cc, the only file that speaks
   HTTP, read here) is an operation of the schema, and every operation of the schema is a route
   of the server. Every operation has a unique operationId.
2. The responses: a real server (`arbiter server --dev`, its nodes run by this script playing
   their agents, with a log server of its own) is driven through every operation, successes and
   errors; every response's status must be one the operation documents, its content type one
   the response lists, and a JSON body must validate against the response's schema. Response
   objects are closed: a field the schema does not list fails (the schema lists every field the
   server writes). Every request body meant to be valid validates against the operation's
   request schema (bad ones are sent as text, unchecked).
3. Every operation of the schema was exercised at least once.

    python3 tests/api/contract_test.py --arbiter build/arbiter [--source .]
"""

import argparse
import copy
import http.server
import json
import os
import re
import sys
import threading
import time
import urllib.parse

import warnings

import jsonschema
import yaml

# jsonschema 4.18 and later deprecate RefResolver (Debian 12 has 4.10, which has nothing else).
warnings.filterwarnings("ignore", category=DeprecationWarning)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from arbiter_server import Server  # noqa: E402

METHODS = ("get", "put", "post", "delete", "patch")

ADMIN, ALICE, VIEWER, JOIN = ("admin-token-0001", "alice-token-0001", "viewer-token-001",
                              "join-token-00001")

CONFIG = """
priority_classes:
  - {name: high, value: 100, preemptible: false}
  - {name: low, value: 10, grace_period: 1s}
queues:
  - {name: org}
  - {name: main, parent: org, quota: {G: {nominal: 4, borrowing_limit: 0}}}
  - {name: other, parent: org}
nodes:
  - name: n-{i}
    count: 2
    gpus: {model: G, count: 2, memory: 40Gi}
    cpu: 1
    memory: 256Mi
server:
  tokens:
    - {name: admin, token: admin-token-0001, role: admin}
    - {name: alice, token: alice-token-0001, role: user, queues: [main], priority_classes: [low, high]}
    - {name: viewer, token: viewer-token-001, role: viewer}
    - {name: join, token: join-token-00001, role: agent, nodes: ["n-*"]}
  cycle_min_interval: 20ms
  cycle_period: 200ms
  node_lost_timeout: 60s
  agent_sync_wait: 200ms
"""

DEVICES = [{"model": "G", "memory_mib": 40960}, {"model": "G", "memory_mib": 40960}]


# ---- The schema ----

def openapi_to_jsonschema(node):
    """OpenAPI 3.0's schema dialect to JSON Schema (draft 4): `nullable` becomes a null type,
    and objects that list their properties are closed unless they say otherwise."""
    if isinstance(node, list):
        return [openapi_to_jsonschema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: openapi_to_jsonschema(v) for k, v in node.items()}
    if out.pop("nullable", False):
        if "$ref" in out:
            out = {"anyOf": [{"$ref": out["$ref"]}, {"type": "null"}]}
        else:
            if "type" in out:
                out["type"] = [out["type"], "null"]
            if "enum" in out:
                out["enum"] = out["enum"] + [None]
    if "properties" in out and isinstance(out["properties"], dict) and \
            "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


class Schema:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.doc = yaml.safe_load(f)
        self.converted = openapi_to_jsonschema(copy.deepcopy(self.doc))
        self.resolver = jsonschema.RefResolver.from_schema(self.converted)
        self.operations = {}  # (METHOD, template) -> operation
        for template, item in self.doc["paths"].items():
            for method in METHODS:
                if method in item:
                    self.operations[(method.upper(), template)] = item[method]
        self.exercised = set()

    def deref(self, node):
        while isinstance(node, dict) and "$ref" in node:
            node = self.resolver.resolve(node["$ref"])[1]
        return node

    def parameters(self, method, template):
        item = self.doc["paths"][template]
        params = list(item.get("parameters", [])) + list(
            item[method.lower()].get("parameters", []))
        return [self.deref(p) for p in params]

    def path_regex(self, method, template):
        """A regular expression of the concrete paths of an operation."""
        enums = {p["name"]: p.get("schema", {}).get("enum") for p in
                 self.parameters(method, template) if p.get("in") == "path"}

        def part(match):
            name = match.group(1)
            if enums.get(name):
                return "(?:" + "|".join(re.escape(v) for v in enums[name]) + ")"
            return "[^/]+"
        pattern = ""
        for literal, param in re.findall(r"([^{]*)(\{[^}]*\})?", template):
            pattern += re.escape(literal)
            if param:
                pattern += part(re.match(r"\{(.*)\}", param))
        return re.compile("^" + pattern + "$")

    def concrete_paths(self, method, template):
        """The operation's paths with each path parameter taken from its enum, else `{}`."""
        paths = [""]
        params = {p["name"]: p for p in self.parameters(method, template) if p.get("in") == "path"}
        for literal, param in re.findall(r"([^{]*)(\{[^}]*\})?", template):
            paths = [p + literal for p in paths]
            if param:
                name = param[1:-1]
                values = (params.get(name, {}).get("schema", {}) or {}).get("enum")
                paths = [p + v for p in paths for v in values] if values else \
                    [p + "{}" for p in paths]
        return paths

    def find(self, method, path):
        """The operation of a concrete request: a template without parameters first."""
        path = urllib.parse.urlsplit(path).path
        matches = [t for (m, t) in self.operations if m == method and
                   self.path_regex(m, t).match(path)]
        matches.sort(key=lambda t: t.count("{"))
        return matches[0] if matches else None


class Failures:
    def __init__(self):
        self.items = []

    def add(self, message):
        self.items.append(message)
        print("FAIL: " + message, flush=True)


# ---- 1. Routes ----

ROUTE_CALL = re.compile(r'\b(?:http\.Route|Sync|Async)\(\s*"([A-Z]+)",\s*"([^"]+)"')
ANY_CALL = re.compile(r'\b(?:http_?(?:\.|->)Route|Sync|Async)\(\s*([^\s,]+)')


def server_routes(source):
    """(METHOD, pattern) of every route src/server/http.cc registers."""
    with open(os.path.join(source, "src/server/http.cc"), encoding="utf-8") as f:
        text = f.read()
    routes = ROUTE_CALL.findall(text)
    # Every other call forwards its method and pattern (Sync to Async, Async to Route), or is a
    # declaration: a route registered some other way would escape this test, so none may be.
    others = [m.group(0) for m in ANY_CALL.finditer(text) if not m.group(1).startswith('"')]
    allowed = {"method", "const"}
    strays = [o for o in others if o.split("(")[1].strip() not in allowed]
    return routes, strays


def expand_route(pattern):
    """A server pattern's concrete shapes: '#' and '*' become '{}', 'a|b' each of a and b."""
    paths = [""]
    for i, segment in enumerate(pattern.split("/")):
        options = ["{}"] if segment in ("#", "*") else segment.split("|")
        paths = [p + ("/" if i else "") + o for p in paths for o in options]
    return paths


def check_routes(schema, source, failures):
    routes, strays = server_routes(source)
    for s in strays:
        failures.add(f"src/server/http.cc: a route registered without a literal method and "
                     f"pattern ({s}...): this test cannot read it")
    if len(routes) < 20:
        failures.add(f"src/server/http.cc: only {len(routes)} routes found; the test's reading "
                     f"of the file is out of date")
    served = {(m, p) for m, pattern in routes for p in expand_route(pattern)}
    documented = {}
    for (method, template) in schema.operations:
        for p in schema.concrete_paths(method, template):
            documented[(method, p)] = template
    for key in sorted(served - set(documented)):
        failures.add(f"route {key[0]} {key[1]} of the server is not in docs/openapi.yaml")
    for key in sorted(set(documented) - served):
        failures.add(f"operation {key[0]} {documented[key]} ({key[1]}) of docs/openapi.yaml is "
                     f"not a route of the server")
    ids = {}
    for (method, template), op in schema.operations.items():
        op_id = op.get("operationId")
        if not op_id:
            failures.add(f"{method} {template}: no operationId")
        elif op_id in ids:
            failures.add(f"operationId {op_id} of {method} {template} is also {ids[op_id]}'s")
        else:
            ids[op_id] = f"{method} {template}"
    print(f"routes: {len(routes)} registrations, {len(served)} concrete routes, "
          f"{len(schema.operations)} operations", flush=True)


# ---- 2. Responses ----

class Checked:
    """A server whose every exchange is checked against the schema."""

    def __init__(self, server, schema, failures):
        self.server = server
        self.schema = schema
        self.failures = failures

    def __call__(self, method, path, token=None, body=None, expect=None, **kwargs):
        template = self.schema.find(method, path)
        where = f"{method} {path}"
        if template is None:
            self.failures.add(f"{where}: no operation of docs/openapi.yaml matches")
            return self.server.request(method, path, token, body, **kwargs)
        op = self.schema.operations[(method, template)]
        self.schema.exercised.add((method, template))
        if body is not None and not isinstance(body, (str, bytes)) and "requestBody" in op:
            request = self.schema.deref(op["requestBody"])
            media = request.get("content", {}).get("application/json", {})
            if "schema" in media:
                self.validate(body, media["schema"], f"{where}: request body")
        r = self.server.request(method, path, token, body, **kwargs)
        if expect is not None and r.status != expect:
            self.failures.add(f"{where}: expected {expect}, got {r.status}: {r.body[:400]!r}")
        responses = op.get("responses", {})
        response = responses.get(str(r.status), responses.get("default"))
        if response is None:
            self.failures.add(f"{where}: status {r.status} is not documented "
                              f"(documented: {', '.join(responses)}): {r.body[:300]!r}")
            return r
        response = self.schema.deref(response)
        content = response.get("content")
        if not content:
            if r.body.strip() and r.content_type == "application/json":
                self.failures.add(f"{where}: {r.status} answers JSON, and the schema has no "
                                  f"content for it")
            return r
        if r.content_type not in content:
            self.failures.add(f"{where}: {r.status} answers {r.content_type!r}, documented: "
                              f"{', '.join(content)}")
            return r
        media = content[r.content_type] or {}
        if r.content_type == "application/json":
            try:
                value = r.json()
            except ValueError as e:
                self.failures.add(f"{where}: not JSON: {e}")
                return r
            if "schema" not in media:
                self.failures.add(f"{where}: {r.status} JSON without a schema")
            else:
                self.validate(value, media["schema"], f"{where}: {r.status}")
        elif r.content_type == "application/yaml":
            yaml.safe_load(r.text())
        return r

    def validate(self, value, schema, where):
        converted = openapi_to_jsonschema(copy.deepcopy(schema))
        validator = jsonschema.Draft4Validator(converted, resolver=self.schema.resolver)
        for error in sorted(validator.iter_errors(value), key=lambda e: list(e.path))[:5]:
            path = "/".join(str(p) for p in error.absolute_path)
            self.failures.add(f"{where}: at '{path}': {error.message[:300]}")


class LogServer(http.server.ThreadingHTTPServer):
    """An agent's log server: every task's log is the same two lines."""

    def __init__(self):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                body = b"hello\nworld\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass
        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def bad(body):
    """A request body the schema refuses, sent as text (not checked against the schema)."""
    return json.dumps(body)


def job(name, queue="main", cls="low", gpus=1000, **more):
    spec = {"name": name, "queue": queue, "priority_class": cls, "argv": ["sleep", "600"],
            "groups": [{"tasks": 1, "gpu_milli": gpus}]}
    spec.update(more)
    return spec


def exercise(call, server, log_port):
    """Every operation: its successes and the errors a client meets."""
    # Health, metrics, the dashboard.
    call("GET", "/healthz", expect=200)
    call("GET", "/readyz", expect=200)
    call("GET", "/metrics", expect=200)
    call("GET", "/ui", expect=308)
    call("GET", "/ui/", expect=200)
    call("GET", "/ui/app.js", expect=200)
    call("GET", "/ui/no-such-file.js", expect=404)

    # Who: every role, and no token.
    for token in (ADMIN, ALICE, VIEWER, JOIN):
        call("GET", "/v1/whoami", token, expect=200)
    call("GET", "/v1/whoami", expect=401)
    call("GET", "/v1/whoami", "not-a-token-at-all", expect=401)

    # Agents: register both nodes (the join token), each with its own credential after.
    creds = {}
    for node in ("n-0", "n-1"):
        r = call("POST", f"/v1/nodes/{node}/register", JOIN,
                 {"devices": DEVICES, "cpu_milli": 1000, "memory_mib": 256, "hostname": node,
                  "log_url": f"http://127.0.0.1:{log_port}"}, expect=200)
        creds[node] = r.json()["credential"]
    call("POST", "/v1/nodes/n-9/register", JOIN, {"devices": DEVICES}, expect=404)
    call("POST", "/v1/nodes/n-0/register", ALICE, {"devices": DEVICES}, expect=403)
    revisions = {node: "" for node in creds}

    def sync(node, tasks=(), wait_ms=0):
        r = call("POST", f"/v1/nodes/{node}/sync?wait_ms={wait_ms}", creds[node],
                 {"revision": revisions[node], "tasks": list(tasks)}, expect=200)
        answer = r.json()
        revisions[node] = answer["revision"]
        return answer

    for node in creds:
        sync(node)
    call("POST", "/v1/nodes/n-0/sync", creds["n-1"], {"revision": "", "tasks": []}, expect=403)
    call("POST", "/v1/nodes/n-0/sync?wait_ms=70000", creds["n-0"], {"revision": ""}, expect=400)

    # Jobs: submit, a retry, bad input, refusals.
    a = call("POST", "/v1/jobs", ALICE, job("a", idempotency_key="a-1"), expect=201).json()["id"]
    call("POST", "/v1/jobs", ALICE, job("a", idempotency_key="a-1"), expect=200)
    call("POST", "/v1/jobs", ALICE, bad({"name": "x"}), expect=400)
    call("POST", "/v1/jobs", ALICE, "{not json", expect=400)
    call("POST", "/v1/jobs", VIEWER, job("v"), expect=403)
    call("POST", "/v1/jobs", ALICE, job("o", queue="other"), expect=403)
    call("POST", "/v1/jobs", ADMIN, job("q", queue="no-such-queue"), expect=404)

    # The job starts on a node: its agent is told, and reports it running.
    where = {}

    def assigned():
        for node in creds:
            for t in sync(node)["tasks"]:
                if t.get("job") == a:
                    where["node"], where["task"] = node, t
                    return True
        return False
    server.wait_for(assigned, "job a's assignment")
    node, task = where["node"], where["task"]
    report = {"job": a, "rank": task["rank"], "run": task["run"], "running": True}
    sync(node, [report])
    server.wait_for(lambda: server.request("GET", f"/v1/jobs/{a}", ADMIN).json()["status"]
                    ["state"] == "running", "job a running")

    # Listing and reading jobs.
    call("GET", "/v1/jobs", ADMIN, expect=200)
    call("GET", "/v1/jobs?queue=main&state=running&user=alice&limit=10", VIEWER, expect=200)
    call("GET", "/v1/jobs?state=sleeping", ADMIN, expect=400)
    call("GET", "/v1/jobs?limit=0", ADMIN, expect=400)
    call("GET", f"/v1/jobs/{a}", ALICE, expect=200)
    call("GET", "/v1/jobs/999999", ADMIN, expect=404)
    call("GET", f"/v1/jobs/{a}/logs", ALICE, expect=200)
    call("GET", f"/v1/jobs/{a}/logs?task=0&tail_bytes=6", ALICE, expect=200)
    call("GET", f"/v1/jobs/{a}/logs?task=7", ALICE, expect=400)
    call("GET", "/v1/jobs/999999/logs", ALICE, expect=404)

    # The job ends: its agent reports it.
    sync(node, [dict(report, running=False, exit_code=0)])
    server.wait_for(lambda: server.request("GET", f"/v1/jobs/{a}", ADMIN).json()["status"]
                    ["state"] == "completed", "job a completed")
    call("GET", f"/v1/jobs/{a}", ALICE, expect=200)
    sync(node, wait_ms=100)

    # Two jobs fill the cluster (and main's quota); then a pending job: held, released, its
    # class changed (it evicts one of them), cancelled both ways.
    fillers = [call("POST", "/v1/jobs", ALICE, job(f"f{i}", gpus=2000), expect=201).json()["id"]
               for i in range(2)]
    server.wait_for(lambda: all(server.request("GET", f"/v1/jobs/{f}", ADMIN).json()["status"]
                                ["state"] == "running" for f in fillers), "the fillers running")
    b = call("POST", "/v1/jobs", ALICE, job("b", gpus=2000, runtime_estimate_ms=60000),
             expect=201).json()["id"]
    call("POST", f"/v1/jobs/{b}/hold", ALICE, expect=200)
    call("POST", f"/v1/jobs/{b}/hold", ALICE, expect=409)
    call("POST", f"/v1/jobs/{b}/release", ALICE, expect=403)
    call("POST", f"/v1/jobs/{b}/release", ADMIN, expect=200)
    call("PATCH", f"/v1/jobs/{b}", ALICE, {"priority_class": "high"}, expect=200)
    call("PATCH", f"/v1/jobs/{b}", ALICE, {"priority_class": "nope"}, expect=404)
    call("PATCH", f"/v1/jobs/{b}", ALICE, bad({"state": "running"}), expect=400)
    call("PATCH", f"/v1/jobs/{b}", VIEWER, {"priority_class": "low"}, expect=403)
    call("PATCH", "/v1/jobs/999999", ADMIN, {"priority_class": "low"}, expect=404)
    c = call("POST", "/v1/jobs", ALICE, job("c", gpus=2000), expect=201).json()["id"]
    server.wait_for(lambda: "reason" in server.request("GET", f"/v1/jobs/{c}", ADMIN).json()
                    and "cycle" not in server.request("GET", f"/v1/jobs/{c}", ADMIN)
                    .json()["reason"], "job c's reason")
    call("GET", f"/v1/jobs/{c}", ALICE, expect=200)
    call("GET", "/v1/jobs?state=pending", ALICE, expect=200)
    call("POST", f"/v1/jobs/{c}/cancel", ALICE, expect=200)
    call("POST", f"/v1/jobs/{c}/cancel", ALICE, expect=409)
    call("DELETE", f"/v1/jobs/{b}", ADMIN, expect=200)
    call("DELETE", f"/v1/jobs/{b}", ADMIN, expect=409)
    call("DELETE", "/v1/jobs/999999", ADMIN, expect=404)
    call("POST", "/v1/jobs/999999/hold", ADMIN, expect=404)

    # Queues.
    call("GET", "/v1/queues", VIEWER, expect=200)
    call("GET", "/v1/queues/usage", VIEWER, expect=200)
    call("PUT", "/v1/queues/other/quota", ADMIN, {"G": {"nominal_milli": 1000}}, expect=200)
    call("GET", "/v1/queues", ADMIN, expect=200)
    call("PUT", "/v1/queues/other/quota", ALICE, {"G": {"nominal_milli": 1000}}, expect=403)
    call("PUT", "/v1/queues/nope/quota", ADMIN, {"G": {"nominal_milli": 1000}}, expect=404)
    call("PUT", "/v1/queues/other/quota", ADMIN, {"G": {"nominal": "0.5", "max": 2}}, expect=200)
    call("PUT", "/v1/queues/other/quota", ADMIN, bad({"G": {"nominal": "lots"}}), expect=400)
    call("PUT", "/v1/queues/other/quota", ADMIN,
         bad({"G": {"nominal": 1, "nominal_milli": 1000}}), expect=400)
    call("DELETE", "/v1/queues/other/quota", ADMIN, expect=200)
    call("DELETE", "/v1/queues/other/quota", ALICE, expect=403)

    # Nodes.
    call("GET", "/v1/nodes", VIEWER, expect=200)
    call("GET", "/v1/cluster/map", VIEWER, expect=200)
    other = "n-1" if node == "n-0" else "n-0"
    call("POST", f"/v1/nodes/{other}/cordon", ADMIN, {"reason": "maintenance"}, expect=200)
    call("GET", "/v1/nodes", ADMIN, expect=200)
    call("GET", "/v1/cluster/map", ADMIN, expect=200)
    call("POST", f"/v1/nodes/{other}/uncordon", ADMIN, expect=200)
    call("POST", f"/v1/nodes/{other}/drain", ADMIN, expect=200)
    call("POST", f"/v1/nodes/{other}/uncordon", ADMIN, expect=200)
    call("POST", f"/v1/nodes/{other}/cordon", ALICE, expect=403)
    call("POST", "/v1/nodes/n-9/cordon", ADMIN, expect=404)
    call("POST", f"/v1/nodes/{other}/cordon", ADMIN, bad({"why": "x"}), expect=400)

    # The snapshot.
    call("GET", "/v1/admin/snapshot", ADMIN, expect=200)
    call("GET", "/v1/admin/snapshot", ALICE, expect=403)

    # Events: a page, one job's, a long poll, a stream.
    r = call("GET", "/v1/events?cursor=0&limit=100", VIEWER, expect=200)
    cursor = r.json()["cursor"]
    call("GET", f"/v1/events?job={a}", VIEWER, expect=200)
    call("GET", f"/v1/events?cursor={cursor}&wait=1", VIEWER, expect=200)
    call("GET", "/v1/events?limit=0", VIEWER, expect=400)
    call("GET", f"/v1/events?job={a}&wait=1", VIEWER, expect=400)
    call("GET", "/v1/events/stream?cursor=x", VIEWER, expect=400)
    stream(call, server)

    # Metrics once more, with jobs and nodes behind them.
    call("GET", "/metrics", expect=200)


def stream(call, server):
    """The event stream: its first events, then the client goes."""
    import http.client
    template = call.schema.find("GET", "/v1/events/stream")
    call.schema.exercised.add(("GET", template))
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("GET", "/v1/events/stream?cursor=0", headers={"Authorization": "Bearer " + VIEWER})
    r = conn.getresponse()
    op = call.schema.operations[("GET", template)]
    content_type = (r.getheader("Content-Type") or "").split(";")[0]
    response = call.schema.deref(op["responses"].get(str(r.status), {}))
    if r.status != 200 or content_type not in response.get("content", {}):
        call.failures.add(f"GET /v1/events/stream: {r.status} {content_type!r} is not documented")
    first = r.readline().decode()
    if not first.startswith("id: "):
        call.failures.add(f"GET /v1/events/stream: the first line is {first!r}, not 'id: SEQ'")
    conn.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arbiter", required=True)
    parser.add_argument("--source", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    args = parser.parse_args()
    failures = Failures()
    schema = Schema(os.path.join(args.source, "docs/openapi.yaml"))
    check_routes(schema, args.source, failures)
    logs = LogServer()
    with Server(args.arbiter, CONFIG) as server:
        call = Checked(server, schema, failures)
        try:
            exercise(call, server, logs.server_address[1])
        except Exception:
            print("".join(server.output[-40:]), file=sys.stderr)
            print(server.request("GET", "/v1/jobs", ADMIN).text(), file=sys.stderr)
            print(server.request("GET", "/v1/events?limit=200", ADMIN).text(), file=sys.stderr)
            raise
    logs.shutdown()
    for key in sorted(set(schema.operations) - schema.exercised):
        failures.add(f"operation {key[0]} {key[1]} was not exercised (add it to this test)")
    if failures.items:
        print(f"{len(failures.items)} failures", flush=True)
        return 1
    print(f"api contract: {len(schema.operations)} operations, every response valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
