"""The Python SDK's overhead on a create-and-wait, against raw HTTP.

Starts a real `arbiter serve` (tests/harness.py: SQLite, the rules backend,
which decides these tasks at once), then makes the same create-and-wait
(POST /v1/tasks with an idempotency key, then GET ?wait until final) N
times through httpx directly and through Arbiter.ask, alternating, on one
connection each. Prints the median and 90th percentile of each and the
median difference, the SDK's cost per call, against its target (< 1 ms):
ok or MISSED, as `make bench` prints its phases.
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import List

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from arbiterhq import Arbiter  # noqa: E402
from harness import Server  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 300
BODY = {"prompt": "Approve this refund?", "allowed_verdicts": ["approve", "reject"], "context": {"auto": "approve"}}


def raw(http: httpx.Client, key: str) -> None:
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": "raw-" + uuid.uuid4().hex}
    task = http.post("/v1/tasks", json=BODY, headers=headers).json()
    while task["status"] not in ("completed", "expired"):
        task = http.get(f"/v1/tasks/{task['id']}", params={"wait": 60}, headers=headers, timeout=70).json()


def main() -> None:
    server = Server()
    try:
        key = server.new_account("bench@example.com")
        server.admin("set-cap", "--email", "bench@example.com", "--cap", str(10 * N + 100))
        raw_ms: List[float] = []
        sdk_ms: List[float] = []
        with httpx.Client(base_url=server.base_url) as http, Arbiter(key, base_url=server.base_url) as sdk:
            for _ in range(20):  # warm both connections
                raw(http, key)
                sdk.ask(BODY["prompt"], BODY["allowed_verdicts"], BODY["context"])
            for _ in range(N):
                t0 = time.perf_counter()
                raw(http, key)
                t1 = time.perf_counter()
                sdk.ask(BODY["prompt"], BODY["allowed_verdicts"], BODY["context"])
                t2 = time.perf_counter()
                raw_ms.append((t1 - t0) * 1000)
                sdk_ms.append((t2 - t1) * 1000)
        q = lambda xs: statistics.quantiles(xs, n=10)[-1]  # noqa: E731
        diffs = [s - r for s, r in zip(sdk_ms, raw_ms)]
        print(f"python create-and-wait, {N} each: raw httpx median {statistics.median(raw_ms):.2f} ms (p90 {q(raw_ms):.2f}), "
              f"arbiterhq median {statistics.median(sdk_ms):.2f} ms (p90 {q(sdk_ms):.2f}), "
              f"overhead median {statistics.median(diffs):+.3f} ms "
              f"(target < 1 ms) {'ok' if statistics.median(diffs) < 1 else 'MISSED'}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
