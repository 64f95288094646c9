"""A real `arbiter serve` for the SDK's tests, built from this repository,
and the people and peers the tests need around it: a reviewer who signs in
and decides on the desk, a webhook receiver, and a proxy that answers 429
or 503 before it lets a request through."""

from __future__ import annotations

import http.server
import json
import os
import re
import secrets
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import httpx

REPO = Path(__file__).resolve().parents[3]

RULES = """\
# verdict  confidence  expression
approve    0.99        context.auto == "approve"
reject     0.99        context.auto == "reject"
approve    0.99        context.tool == "issue_refund" && context.arguments.amount < 10
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Any, what: str, timeout: float = 30.0) -> Any:
    """Calls check until it returns something true, and returns that; the
    bound only ends a failing test."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def build_binary(into: Path) -> Path:
    """The arbiter binary: ARBITER_BIN when set, else built from the
    repository."""
    given = os.environ.get("ARBITER_BIN")
    if given:
        return Path(given)
    out = into / "arbiter"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/arbiter"], cwd=REPO, check=True)
    return out


class Database:
    """The store of one test run: a fresh Postgres database when
    ARBITER_TEST_DATABASE_URL names a server, else a SQLite file."""

    def __init__(self, tmp: Path) -> None:
        self.pg = os.environ.get("ARBITER_TEST_DATABASE_URL", "")
        if not self.pg and os.environ.get("ARBITER_TEST_REQUIRE_POSTGRES") == "1":
            raise RuntimeError("ARBITER_TEST_REQUIRE_POSTGRES=1 but ARBITER_TEST_DATABASE_URL is unset")
        self.name = "arbiter_sdk_" + secrets.token_hex(4)
        if self.pg:
            self._admin("CREATE DATABASE " + self.name)
            u = urllib.parse.urlsplit(self.pg)
            self.url = urllib.parse.urlunsplit((u.scheme, u.netloc, "/" + self.name, u.query, ""))
        else:
            self.url = "sqlite:" + str(tmp / "arbiter.db")

    def _admin(self, sql: str) -> None:
        u = urllib.parse.urlsplit(self.pg)
        admin = urllib.parse.urlunsplit((u.scheme, u.netloc, "/postgres", u.query, ""))
        subprocess.run(["psql", "-w", "-q", admin, "-c", sql], check=True)

    def drop(self) -> None:
        if self.pg:
            self._admin(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


class Server:
    """One `arbiter serve` on a free loopback port, with the rules backend:
    a task whose context has "auto": "approve" (or "reject") is decided by
    the agent; any other goes to a person."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="arbiter-sdk-"))
        self.bin = build_binary(self.tmp)
        self.db = Database(self.tmp)
        rules = self.tmp / "rules.txt"
        rules.write_text(RULES)
        port = free_port()
        self.base_url = f"http://127.0.0.1:{port}"
        self.env = {
            **os.environ,
            "ARBITER_ADDR": f"127.0.0.1:{port}",
            "ARBITER_DATABASE_URL": self.db.url,
            "ARBITER_AGENT": "rules",
            "ARBITER_AGENT_RULES": str(rules),
            "ARBITER_WEBHOOK_ALLOW_PRIVATE": "1",
            "ARBITER_LOG_LEVEL": "info",
        }
        self.log_path = self.tmp / "serve.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([str(self.bin), "serve"], env=self.env, stdout=self._log, stderr=subprocess.STDOUT)
        wait_for(self._healthy, "arbiter serve to answer /healthz")

    def _healthy(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError("arbiter serve exited:\n" + self.log())
        try:
            return httpx.get(self.base_url + "/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def admin(self, *args: str) -> str:
        out = subprocess.run([str(self.bin), "admin", *args], env=self.env, check=True, capture_output=True, text=True)
        return out.stdout.strip()

    def new_account(self, email: str) -> str:
        """A new account owned by email; returns its API key."""
        return self.admin("create-key", "--email", email)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()
        self.db.drop()


class Reviewer:
    """A person on the reviewer site: signs in with the e-mail link (which
    the server logs without SMTP) and decides tasks on the desk, as a
    browser's form posts would."""

    def __init__(self, server: Server, email: str) -> None:
        self.server = server
        self.email = email
        self.http = httpx.Client(base_url=server.base_url, headers={"Origin": server.base_url}, timeout=30)
        self._sign_in()

    def _sign_in(self) -> None:
        seen = self.server.log().count("sign-in link")
        r = self.http.post("/signin/email", data={"email": self.email, "next": "/"})
        assert r.status_code == 200, r.text
        pattern = re.compile(r'to=' + re.escape(self.email) + r' url="[^"]*token=([0-9a-f]+)"')

        def token() -> Optional[str]:
            found = pattern.findall(self.server.log())
            return found[-1] if len(found) > 0 and self.server.log().count("sign-in link") > seen else None

        tok = wait_for(token, "the logged sign-in link")
        r = self.http.post("/signin/email/confirm", data={"token": tok, "next": "/"})
        assert r.status_code == 303, r.text

    def decide(self, task_id: str, verdict: str, rationale: str = "", action_digest: str = "",
               edits: Optional[Dict[str, str]] = None) -> None:
        """Decides a task waiting for a person, as the desk's form does:
        the page first, whose form carries the digest of the action it
        shows (``action_digest`` sends another instead); ``edits`` are what
        the person types in the action's edit inputs, by member."""
        page = self.http.get(f"/review/tasks/{task_id}")
        assert page.status_code == 200, f"{page.status_code}: {page.text[:500]}"
        data: Dict[str, str] = {"verdict": verdict, "rationale": rationale}
        m = re.search(r'name="action_digest" value="([^"]+)"', page.text)
        if action_digest or m:
            data["action_digest"] = action_digest or (m.group(1) if m else "")
        for name, value in (edits or {}).items():
            assert f'name="arg.{name}"' in page.text, f"the desk offers no edit of {name}"
            data["arg." + name] = value
        r = self.http.post(f"/review/tasks/{task_id}", data=data)
        assert r.status_code == 303, f"{r.status_code}: {r.text[:500]}"

    def callback_secret(self) -> str:
        """The account's callback signing secret, revealed on /webhooks."""
        r = self.http.post("/webhooks/callback-secret/reveal")
        assert r.status_code == 200, r.text[:500]
        m = re.search(r"whsec_[A-Za-z0-9+/=]+", r.text)
        assert m, "no secret on the webhooks page"
        return m.group(0)

    def close(self) -> None:
        self.http.close()


class Receiver:
    """An HTTP server on loopback that records the webhook messages posted
    to it and answers 204."""

    def __init__(self) -> None:
        self.messages: List[Tuple[Dict[str, str], bytes]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer._lock:
                    outer.messages.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def for_task(self, task_id: str, event: str) -> Optional[Tuple[Dict[str, str], bytes]]:
        with self._lock:
            for headers, body in self.messages:
                msg = json.loads(body)
                if msg.get("type") == event and msg.get("data", {}).get("id") == task_id:
                    return headers, body
        return None

    def close(self) -> None:
        self.httpd.shutdown()


class Proxy:
    """Stands in front of the server: answers the first requests from a
    script (status and headers), then passes every request through. Records
    when each request came and its Idempotency-Key."""

    def __init__(self, upstream: str, script: List[Tuple[int, Dict[str, str]]]) -> None:
        self.script = list(script)
        self.seen: List[Tuple[float, str, Optional[str]]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer._lock:
                    outer.seen.append((time.monotonic(), self.command, self.headers.get("Idempotency-Key")))
                    canned = outer.script.pop(0) if outer.script else None
                if canned is not None:
                    status, headers = canned
                    payload = json.dumps({"error": "Scripted answer."}).encode()
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                fwd = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "connection")}
                r = httpx.request(self.command, upstream + self.path, headers=fwd, content=body, timeout=90)
                self.send_response(r.status_code)
                for k, v in r.headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

            do_GET = _handle
            do_POST = _handle

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
