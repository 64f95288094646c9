"""What the sync and async clients share: settings, request bodies, the
retry rule and the reading of answers. Only the sending differs."""

from __future__ import annotations

import dataclasses
import email.utils
import math
import os
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import quote

import httpx

from ._base import Response
from ._errors import APIConnectionError, ArbiterError, WaitTimeoutError, error_for
from ._models import Task

__version__ = "0.1.0"

DEFAULT_BASE_URL = "http://localhost:8080"
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 3
DEFAULT_MAX_RETRY_WAIT = 60.0
# The longest wait the server grants one long-poll request, in seconds.
MAX_LONG_POLL = 60
# How long a wait for a final task lasts when the caller gives no timeout,
# in seconds: a person may take hours, so a caller that means to wait that
# long says so (timeout=None waits without bound).
DEFAULT_WAIT = 600.0


@dataclass(frozen=True)
class Settings:
    """A client's resolved configuration."""

    api_key: str
    base_url: str
    timeout: float
    max_retries: int
    max_retry_wait: float
    user_agent: str


# The environment variables a client reads when it is given no key or
# address: the specification's names first, then the ones named after the
# service (what its other tools read).
API_KEY_VARIABLES = ("SVC_API_KEY", "ARBITER_API_KEY")
BASE_URL_VARIABLES = ("SVC_BASE_URL", "ARBITER_BASE_URL")


def _first_set(names: Sequence[str]) -> str:
    for name in names:
        value = os.environ.get(name, "")
        if value:
            return value
    return ""


def resolve_settings(
    api_key: Optional[str],
    base_url: Optional[str],
    timeout: float,
    max_retries: int,
    max_retry_wait: float,
) -> Settings:
    """Fills what the caller left out from the environment: SVC_API_KEY
    (else ARBITER_API_KEY) and SVC_BASE_URL (else ARBITER_BASE_URL)."""
    key = api_key if api_key is not None else _first_set(API_KEY_VARIABLES)
    if not key:
        raise ValueError("no API key: pass api_key= or set SVC_API_KEY (or ARBITER_API_KEY)")
    url = base_url or _first_set(BASE_URL_VARIABLES) or DEFAULT_BASE_URL
    return check_settings(Settings(
        api_key=key,
        base_url=url.rstrip("/"),
        timeout=timeout,
        max_retries=max_retries,
        max_retry_wait=max_retry_wait,
        user_agent=f"arbiterhq-python/{__version__}",
    ))


def check_settings(s: Settings) -> Settings:
    """s, when its numbers make sense; else ValueError."""
    if s.max_retries < 0:
        raise ValueError("max_retries must be 0 or more")
    if s.timeout <= 0:
        raise ValueError("timeout must be more than 0 seconds")
    if s.max_retry_wait < 0:
        raise ValueError("max_retry_wait must be 0 or more seconds")
    return s


def with_options(
    s: Settings,
    timeout: Optional[float],
    max_retries: Optional[int],
    max_retry_wait: Optional[float],
) -> Settings:
    """s with the options given replaced."""
    return check_settings(dataclasses.replace(
        s,
        timeout=s.timeout if timeout is None else timeout,
        max_retries=s.max_retries if max_retries is None else max_retries,
        max_retry_wait=s.max_retry_wait if max_retry_wait is None else max_retry_wait,
    ))


def new_idempotency_key() -> str:
    """A fresh key for a create the caller gave none: the create can then be
    retried safely, as the server stores its task once per key."""
    return "arbiterhq-" + uuid.uuid4().hex


@dataclass(frozen=True)
class Call:
    """One API request, before it is sent (and sent again on a retry)."""

    method: str
    path: str
    params: Optional[Mapping[str, Any]] = None
    body: Any = None
    idempotency_key: Optional[str] = None
    # repeatable marks a POST the server stores at most once however often
    # it is sent (its tasks carry idempotency keys), so that it may be
    # retried when its outcome is unknown.
    repeatable: bool = False
    # timeout, when set, replaces the client's read timeout (long-polls).
    timeout: Optional[float] = None

    def headers(self, s: Settings) -> Dict[str, str]:
        """The request's headers."""
        h = {
            "Authorization": f"Bearer {s.api_key}",
            "Accept": "application/json",
            "User-Agent": s.user_agent,
        }
        if self.idempotency_key is not None:
            h["Idempotency-Key"] = self.idempotency_key
        return h

    def request(self, client: Any, s: Settings) -> httpx.Request:
        """The httpx request, built by either kind of httpx client."""
        timeout = httpx.Timeout(s.timeout, read=self.timeout or s.timeout)
        req: httpx.Request = client.build_request(
            self.method,
            s.base_url + self.path,
            params=self.params,
            json=self.body,
            headers=self.headers(s),
            timeout=timeout,
        )
        return req


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Seconds a Retry-After header asks for (delay seconds or an HTTP
    date), or None when it is absent or unreadable."""
    if not value:
        return None
    v = value.strip()
    if v.isdigit():
        return float(v)
    try:
        when = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def backoff(attempt: int) -> float:
    """The wait before retry ``attempt`` (from 0) when the server named
    none: 0.2 s doubling up to 12.8 s, with up to 20% jitter so that many
    clients spread out."""
    d = 0.2 * float(1 << min(attempt, 6))
    return d + random.uniform(0, d / 5)


def answer_error(resp: httpx.Response) -> ArbiterError:
    """The typed error for a non-200 answer."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    return error_for(
        resp.status_code,
        body,
        request_id=resp.headers.get("X-Request-Id"),
        retry_after=parse_retry_after(resp.headers.get("Retry-After")),
    )


@dataclass(frozen=True)
class Answer:
    """A successful answer: its decoded JSON (None for a 204) and its facts."""

    data: Any
    response: Response


def read_answer(call: Call, resp: httpx.Response) -> Union[Answer, ArbiterError]:
    """The answer to call, or the error it is."""
    if resp.status_code == 200:
        return Answer(resp.json(), Response.from_headers(200, resp.headers))
    if resp.status_code == 204 and call.method == "DELETE":
        return Answer(None, Response.from_headers(204, resp.headers))
    return answer_error(resp)


def connection_error(call: Call, exc: Exception) -> ArbiterError:
    """The error for a request that got no answer."""
    return APIConnectionError(f"{call.method} {call.path}: no answer from the server ({type(exc).__name__})")


def retry_wait(call: Call, attempt: int, err: ArbiterError, s: Settings) -> Optional[float]:
    """How long to wait before sending ``call`` again after ``err``, or None
    to give up. A 429 is retried after its Retry-After when that is at most
    ``max_retry_wait`` (a daily cap's wait of hours is not); a 5xx or a lost
    connection is retried on reads and on creates that carry an idempotency
    key, and so is a 409 (the key's first request is still being stored)."""
    if attempt >= s.max_retries:
        return None
    safe = call.method == "GET" or call.repeatable
    if isinstance(err, APIConnectionError):
        retryable = safe
    elif err.status == 429:
        retryable = True
    elif err.status >= 500:
        retryable = safe
    elif err.status == 409:
        retryable = call.repeatable
    else:
        retryable = False
    if not retryable:
        return None
    wait = err.retry_after if err.retry_after is not None else backoff(attempt)
    if wait > s.max_retry_wait:
        return None
    return wait


def drop_none(fields: Mapping[str, Any]) -> Dict[str, Any]:
    """The fields given a value: a field left as None is left out, so the
    server applies the task type's policy, or its defaults."""
    return {k: v for k, v in fields.items() if v is not None}


def task_body(fields: Mapping[str, Any]) -> Dict[str, Any]:
    """The JSON of a task create from TaskCreateParams; fields left as None
    are left out. A single string where a list belongs is refused, since
    Python would otherwise send its characters."""
    for name in ("allowed_verdicts", "notify", "veto", "reminders"):
        if isinstance(fields.get(name), str):
            raise TypeError(f"{name} must be a list of strings, not one string")
    body = drop_none(fields)
    for name in ("allowed_verdicts", "notify", "veto", "reminders"):
        if name in body:
            body[name] = list(body[name])
    if "escalation" in body:
        body["escalation"] = [dict(r) for r in body["escalation"]]
    if "display" in body:
        body["display"] = dict(body["display"])
    return body


def batch_body(tasks: Sequence[Mapping[str, Any]]) -> Tuple[Dict[str, Any], List[str]]:
    """The JSON of a batch create and each item's idempotency key: the
    caller's ``idempotency_key`` where given, a fresh one elsewhere, so the
    whole batch may be retried safely."""
    items: List[Dict[str, Any]] = []
    keys: List[str] = []
    for t in tasks:
        item = task_body(t)
        key = item.get("idempotency_key") or new_idempotency_key()
        item["idempotency_key"] = key
        items.append(item)
        keys.append(key)
    return {"tasks": items}, keys


@dataclass(frozen=True)
class TaskResult:
    """The outcome of one task of a batch: ``task`` when it was created (or
    replayed), else ``error``. ``status`` is the item's HTTP-like status."""

    status: int
    task: Optional[Task] = None
    replayed: bool = False
    error: Optional[ArbiterError] = None

    @property
    def ok(self) -> bool:
        """Whether the task was created or replayed."""
        return self.task is not None


def batch_results(data: Mapping[str, Any], request_id: Optional[str] = None) -> List[TaskResult]:
    """Reads a batch answer: one result per item, in the order sent."""
    out: List[TaskResult] = []
    for r in data.get("results", []):
        status = int(r.get("status", 0))
        if status == 200 and isinstance(r.get("task"), dict):
            out.append(TaskResult(status=200, task=Task.from_dict(r["task"]), replayed=bool(r.get("replayed"))))
        else:
            out.append(TaskResult(status=status, error=error_for(status, r, request_id=request_id)))
    return out


def list_params(
    *,
    status: Optional[str] = None,
    task_type: Optional[str] = None,
    source: Optional[str] = None,
    touchpoint: Optional[str] = None,
    final_tier: Optional[str] = None,
    created_after: Optional[float] = None,
    created_before: Optional[float] = None,
    limit: Optional[int] = None,
    starting_after: Optional[str] = None,
) -> Dict[str, Any]:
    """The query of a list request; filters left as None are left out."""
    p: Dict[str, Any] = {
        "status": status,
        "task_type": task_type,
        "source": source,
        "touchpoint": touchpoint,
        "final_tier": final_tier,
        "created_after": created_after,
        "created_before": created_before,
        "limit": limit,
        "starting_after": starting_after,
    }
    return {k: v for k, v in p.items() if v is not None}


def calibration_params(
    *,
    task_type: Optional[str] = None,
    source: Optional[str] = None,
    model: Optional[str] = None,
    version: Optional[str] = None,
    created_after: Optional[float] = None,
    created_before: Optional[float] = None,
    target_error_rate: Optional[float] = None,
    confidence: Optional[float] = None,
) -> Dict[str, Any]:
    """The query of a calibration report; filters left as None are left out."""
    return drop_none({
        "task_type": task_type, "source": source, "model": model, "version": version,
        "created_after": created_after, "created_before": created_before,
        "target_error_rate": target_error_rate, "confidence": confidence,
    })


def long_poll_seconds(remaining: Optional[float]) -> int:
    """The ``wait`` of the next long-poll: the server's most, or the seconds
    left before the caller's deadline rounded up, so that a wait never
    ends before the time it was given."""
    if remaining is None:
        return MAX_LONG_POLL
    return max(0, min(MAX_LONG_POLL, math.ceil(remaining)))


def wait_deadline(timeout: Optional[float]) -> Optional[float]:
    """The monotonic instant a wait of ``timeout`` seconds ends, or None."""
    if timeout is None:
        return None
    if timeout < 0:
        raise ValueError("a wait's timeout must be 0 or more seconds (None: no bound)")
    return time.monotonic() + timeout


def wait_timeout(task_id: str, last: Optional[Task]) -> WaitTimeoutError:
    """The error of a wait that ran out of time."""
    state = "never read" if last is None else f"still {last.status}"
    return WaitTimeoutError(f"task {task_id} is not final yet ({state})", last)


def policy_path(task_type: str) -> str:
    """The path of the policy of a task type ("default": the default policy)."""
    if not task_type:
        raise ValueError("a policy needs a task type")
    return "/v1/policies/" + quote(task_type, safe="")


def task_path(task_id: str) -> str:
    """The path of one task; an id is never allowed to leave it."""
    if not task_id or "/" in task_id or "?" in task_id or "#" in task_id:
        raise ValueError(f"not a task id: {task_id!r}")
    return "/v1/tasks/" + task_id
