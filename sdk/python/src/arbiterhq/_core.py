"""What the sync and async clients share: settings, request bodies, the
retry rule and the reading of answers. Only the sending differs."""

from __future__ import annotations

import email.utils
import os
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import quote

import httpx

from ._errors import APIConnectionError, ArbiterError, error_for
from ._models import Task, TaskResult

__version__ = "0.1.0"

DEFAULT_BASE_URL = "http://localhost:8080"
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 3
DEFAULT_MAX_RETRY_WAIT = 60.0
# The longest wait the server grants one long-poll request, in seconds.
MAX_LONG_POLL = 60
# Time a long-poll leaves for the answer to arrive once the server stops
# waiting.
LONG_POLL_MARGIN = 10.0


@dataclass(frozen=True)
class Settings:
    """A client's resolved configuration."""

    api_key: str
    base_url: str
    timeout: float
    max_retries: int
    max_retry_wait: float
    user_agent: str


def resolve_settings(
    api_key: Optional[str],
    base_url: Optional[str],
    timeout: float,
    max_retries: int,
    max_retry_wait: float,
) -> Settings:
    """Fills what the caller left out from SVC_API_KEY and SVC_BASE_URL."""
    key = api_key if api_key is not None else os.environ.get("SVC_API_KEY", "")
    if not key:
        raise ValueError("no API key: pass api_key= or set SVC_API_KEY")
    url = base_url or os.environ.get("SVC_BASE_URL") or DEFAULT_BASE_URL
    if max_retries < 0:
        raise ValueError("max_retries must be 0 or more")
    return Settings(
        api_key=key,
        base_url=url.rstrip("/"),
        timeout=timeout,
        max_retries=max_retries,
        max_retry_wait=max_retry_wait,
        user_agent=f"arbiterhq-python/{__version__}",
    )


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


def task_body(
    prompt: str,
    allowed_verdicts: Sequence[str],
    *,
    context: Any = None,
    confidence_threshold: Optional[float] = None,
    task_type: Optional[str] = None,
    touchpoint: Optional[str] = None,
    source: Optional[str] = None,
    deadline_seconds: Optional[int] = None,
    callback_url: Optional[str] = None,
    audit_rate: Optional[float] = None,
    on_expiry: Optional[str] = None,
    agent_floor: Optional[float] = None,
    on_expiry_fallback: Optional[str] = None,
    reminders: Optional[Sequence[str]] = None,
    escalation: Optional[Sequence[Mapping[str, str]]] = None,
    gold_verdict: Optional[str] = None,
    notify: Optional[Sequence[str]] = None,
    display: Optional[Mapping[str, Any]] = None,
    reviews_required: Optional[int] = None,
    consensus: Optional[str] = None,
    quorum: Optional[int] = None,
    veto: Optional[Sequence[str]] = None,
    requested_by: Optional[str] = None,
    exclude_requester: Optional[bool] = None,
    tiebreak: Optional[str] = None,
) -> Dict[str, Any]:
    """The JSON of a task create; fields left as None are left out, so the
    server applies the task type's policy, or its defaults."""
    for name, value in (("notify", notify), ("veto", veto)):
        if isinstance(value, str):
            raise TypeError(f"{name} must be a list of strings, not one string")
    if isinstance(allowed_verdicts, str):
        raise TypeError("allowed_verdicts must be a list of strings, not one string")
    body: Dict[str, Any] = {"prompt": prompt, "allowed_verdicts": list(allowed_verdicts)}
    optional: Dict[str, Any] = {
        "context": context,
        "confidence_threshold": confidence_threshold,
        "task_type": task_type,
        "touchpoint": touchpoint,
        "source": source,
        "deadline_seconds": deadline_seconds,
        "callback_url": callback_url,
        "audit_rate": audit_rate,
        "on_expiry": on_expiry,
        "agent_floor": agent_floor,
        "on_expiry_fallback": on_expiry_fallback,
        "reminders": None if reminders is None else list(reminders),
        "escalation": None if escalation is None else [dict(r) for r in escalation],
        "gold_verdict": gold_verdict,
        "notify": None if notify is None else list(notify),
        "display": None if display is None else dict(display),
        "reviews_required": reviews_required,
        "consensus": consensus,
        "quorum": quorum,
        "veto": None if veto is None else list(veto),
        "requested_by": requested_by,
        "exclude_requester": exclude_requester,
        "tiebreak": tiebreak,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    return body


def batch_body(tasks: Sequence[Mapping[str, Any]]) -> Tuple[Dict[str, Any], List[str]]:
    """The JSON of a batch create and each item's idempotency key: the
    caller's ``idempotency_key`` where given, a fresh one elsewhere, so the
    whole batch may be retried safely."""
    items: List[Dict[str, Any]] = []
    keys: List[str] = []
    for t in tasks:
        fields = dict(t)
        key = fields.pop("idempotency_key", None) or new_idempotency_key()
        item = task_body(**fields)
        item["idempotency_key"] = key
        items.append(item)
        keys.append(key)
    return {"tasks": items}, keys


def batch_results(data: Mapping[str, Any]) -> List[TaskResult]:
    """Reads a batch answer: one result per item, in the order sent."""
    out: List[TaskResult] = []
    for r in data.get("results", []):
        status = int(r.get("status", 0))
        if status == 200 and isinstance(r.get("task"), dict):
            out.append(TaskResult(status=200, task=Task.from_dict(r["task"]), replayed=bool(r.get("replayed"))))
        else:
            out.append(TaskResult(status=status, error=error_for(status, r)))
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
    page_size: Optional[int] = None,
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
        "limit": page_size,
    }
    return {k: v for k, v in p.items() if v is not None}


def long_poll_seconds(remaining: Optional[float]) -> int:
    """The ``wait`` of the next long-poll: the server's most, or the whole
    seconds left before the caller's deadline."""
    if remaining is None:
        return MAX_LONG_POLL
    return max(0, min(MAX_LONG_POLL, int(remaining)))


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
