"""A client for the Arbiter server's REST API (docs/api.md), on the standard library alone.

    from arbiter.client import Client
    c = Client("http://127.0.0.1:8642", token="example-alice-token")
    job = c.submit({"name": "finetune", "queue": "training", "priority_class": "P1",
                    "groups": [{"tasks": 2, "gpu_milli": 8000}]})
    c.explain(job["id"])["reason"]
    for event in c.watch(cursor=0):
        print(event["kind"], event["job"])

The server's address and token default to the environment's ARBITER_SERVER and ARBITER_TOKEN,
as for the command. A refused request raises ApiError with the server's code, field and message.
"""

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Client", "ApiError"]


class ApiError(Exception):
    """A request the server refused (or could not answer): `status` (HTTP status, 0 when the
    server could not be reached), `code` (invalid_argument, not_found, ...), `field` (the path of
    the field at fault, "" when no one field is) and `message` (for people: the field, then the
    problem)."""

    def __init__(self, status, code, field, message):
        super().__init__(message)
        self.status = status
        self.code = code
        self.field = field
        self.message = message


class Client:
    """The server at `server` (default $ARBITER_SERVER, else http://127.0.0.1:8642) with the
    bearer token `token` (default $ARBITER_TOKEN). `ca_file`: the CA that signed an https
    server's certificate (default: the system's). `timeout`: seconds per request."""

    def __init__(self, server=None, token=None, timeout=30, ca_file=None):
        self.server = (server or os.environ.get("ARBITER_SERVER") or "http://127.0.0.1:8642").rstrip(
            "/"
        )
        if "://" not in self.server:
            self.server = "http://" + self.server
        self.token = token if token is not None else os.environ.get("ARBITER_TOKEN", "")
        self.timeout = timeout
        self._context = ssl.create_default_context(cafile=ca_file) if ca_file else None

    # ---- the transport ----

    def _open(self, method, path, body=None, params=None, headers=None, timeout=None):
        url = self.server + path
        if params:
            query = {k: v for k, v in params.items() if v is not None}
            if query:
                url += "?" + urllib.parse.urlencode(query)
        data = None
        request_headers = {"Accept": "application/json"}
        if self.token:
            request_headers["Authorization"] = "Bearer " + self.token
        if body is not None:
            data = json.dumps(body).encode()
            request_headers["Content-Type"] = "application/json"
        request_headers.update(headers or {})
        request = urllib.request.Request(url, data=data, method=method, headers=request_headers)
        try:
            return urllib.request.urlopen(
                request, timeout=timeout or self.timeout, context=self._context
            )
        except urllib.error.HTTPError as e:
            raise _api_error(e.code, e.read()) from None
        except urllib.error.URLError as e:
            raise ApiError(0, "unavailable", "", f"{self.server}: {e.reason}") from None

    def _call(self, method, path, body=None, params=None):
        with self._open(method, path, body, params) as response:
            text = response.read()
        return json.loads(text) if text else {}

    # ---- jobs ----

    def submit(self, spec):
        """Submits a job spec (docs/api.md, "Submit": name, queue, priority_class, groups, ...);
        returns {"id", "name", "duplicate"}."""
        return self._call("POST", "/v1/jobs", body=spec)

    def jobs(self, queue=None, state=None, user=None, limit=None):
        """The jobs, by id (active ones and the most recently finished), filtered as given;
        `state` may be a list (several states, one request each, merged by id)."""
        if isinstance(state, (list, tuple)):
            out = {}
            for s in state:
                for j in self.jobs(queue=queue, state=s, user=user, limit=limit):
                    out[j["id"]] = j
            return [out[k] for k in sorted(out)]
        answer = self._call(
            "GET", "/v1/jobs", params={"queue": queue, "state": state, "user": user, "limit": limit}
        )
        return answer["jobs"] if isinstance(answer, dict) else answer

    def job(self, job_id):
        """One job as the server holds it: {"id", "spec", "status", "reason", "verdict", ...}."""
        return self._call("GET", f"/v1/jobs/{int(job_id)}")

    def explain(self, job_id):
        """Why a job is where it is, as ``arbiter explain``: {"id", "name", "state", "reason",
        "verdict", "tasks", "reserved_start_ms"}; `reason` is the engine's (pending: the stage
        and cause of its last cycle), absent keys are None."""
        j = self.job(job_id)
        return {
            "id": j.get("id"),
            "name": j.get("spec", {}).get("name"),
            "state": j.get("status", {}).get("state"),
            "reason": j.get("reason"),
            "verdict": j.get("verdict"),
            "tasks": j.get("tasks"),
            "reserved_start_ms": j.get("reserved_start_ms"),
        }

    def cancel(self, job_id):
        """Cancels a job (admin, or its submitter)."""
        return self._call("POST", f"/v1/jobs/{int(job_id)}/cancel")

    def queues(self):
        """The queues with their quotas and usage."""
        return self._call("GET", "/v1/queues")

    def nodes(self):
        """The nodes with their devices and states."""
        return self._call("GET", "/v1/nodes")

    # ---- events ----

    def events(self, cursor=0, limit=None, wait=None, job=None):
        """One page of events after `cursor`: {"cursor", "events"}; `wait` (seconds) long-polls."""
        return self._call(
            "GET", "/v1/events", params={"cursor": cursor, "limit": limit, "wait": wait, "job": job}
        )

    def watch(self, cursor=0, kinds=None, job=None):
        """Every event after `cursor` as it is committed (the server-sent event stream), as
        dicts: {"seq", "kind", "job", "state", "time_ms", "actor", ...}; forever, until the
        caller stops iterating. `kinds` and `job` keep only those events. A stream the server ends
        (it fell behind, or the connection dropped) is reopened from the last event seen."""
        kinds = set([kinds] if isinstance(kinds, str) else kinds or [])
        while True:
            response = self._open(
                "GET",
                "/v1/events/stream",
                params={"cursor": cursor},
                headers={"Accept": "text/event-stream"},
                timeout=max(self.timeout, 30),
            )
            with response:
                for event, data in _server_sent_events(response):
                    if event == "dropped":
                        cursor = json.loads(data).get("cursor", cursor)
                        break
                    e = json.loads(data)
                    cursor = e.get("seq", cursor)
                    if kinds and e.get("kind") not in kinds:
                        continue
                    if job is not None and e.get("job") != job:
                        continue
                    yield e


def _server_sent_events(response):
    """(event, data) per message of a text/event-stream; comments skipped."""
    event, data = "message", []
    for raw in response:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)


def _api_error(status, body):
    try:
        e = json.loads(body)["error"]
        return ApiError(status, e.get("code", ""), e.get("field", ""), e.get("message", ""))
    except (ValueError, KeyError, TypeError):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
        return ApiError(status, "", "", text.strip() or f"HTTP {status}")
