"""The SDK's pure parts, without a server."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Optional

import pytest

import arbiterhq
from arbiterhq import _core
from arbiterhq._errors import APIConnectionError, error_for

SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()


def _sign(body: bytes, msg_id: str, ts: int, secret: str = SECRET) -> str:
    key = base64.b64decode(secret[len("whsec_"):])
    mac = hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def test_verify_webhook_accepts_any_of_several_signatures_during_rotation() -> None:
    body = json.dumps({"type": "ping", "timestamp": "2026-11-26T00:00:00Z", "data": {"endpoint_id": "wh_0f6b1a65f4789c78"}}).encode()
    old = "whsec_" + base64.b64encode(b"o" * 32).decode()
    headers = {
        "Webhook-Id": "msg_1",
        "Webhook-Timestamp": "1000",
        "Webhook-Signature": _sign(body, "msg_1", 1000, old) + " " + _sign(body, "msg_1", 1000),
    }
    for secret in (SECRET, old):
        event = arbiterhq.verify_webhook(body, headers, secret, now=1000)
        assert isinstance(event, arbiterhq.PingEvent)
        assert event.data.endpoint_id == "wh_0f6b1a65f4789c78"


@pytest.mark.parametrize(
    "change, now",
    [
        ({}, 1000 + 301),  # too old
        ({}, 1000 - 301),  # too new
        ({"Webhook-Id": "msg_2"}, 1000),  # another message's id
        ({"Webhook-Signature": "v2,abc"}, 1000),  # no v1 signature
        ({"Webhook-Timestamp": "soon"}, 1000),
    ],
)
def test_verify_webhook_refuses(change: "dict[str, str]", now: float) -> None:
    body = b'{"type":"ping","timestamp":"2026-11-26T00:00:00Z","data":{"endpoint_id":"wh_0f6b1a65f4789c78"}}'
    headers = {"Webhook-Id": "msg_1", "Webhook-Timestamp": "1000", "Webhook-Signature": _sign(body, "msg_1", 1000)}
    assert arbiterhq.verify_webhook(body, headers, SECRET, now=1000)
    headers.update(change)
    with pytest.raises(arbiterhq.WebhookVerificationError):
        arbiterhq.verify_webhook(body, headers, SECRET, now=now)


def test_verify_webhook_names_a_missing_header() -> None:
    with pytest.raises(arbiterhq.WebhookVerificationError, match="webhook-signature"):
        arbiterhq.verify_webhook(b"{}", {"webhook-id": "m", "webhook-timestamp": "1"}, SECRET, now=1)


@pytest.mark.parametrize(
    "value, want",
    [("3", 3.0), (" 12 ", 12.0), ("", None), (None, None), ("soon", None), ("-1", None),
     ("Thu, 01 Jan 1970 00:01:40 GMT", 40.0)],
)
def test_parse_retry_after(value: Optional[str], want: Optional[float]) -> None:
    assert _core.parse_retry_after(value, now=60) == want


S = _core.Settings(api_key="k", base_url="u", timeout=1, max_retries=2, max_retry_wait=10, user_agent="t")
GET = _core.Call("GET", "/v1/tasks/x")
CREATE = _core.Call("POST", "/v1/tasks", repeatable=True)
UNSAFE = _core.Call("POST", "/demo/verdicts")


@pytest.mark.parametrize(
    "call, status, retry_after, attempt, retried",
    [
        (GET, 503, 1.0, 0, True),
        (GET, 500, None, 0, True),
        (CREATE, 503, None, 0, True),
        (UNSAFE, 503, None, 0, False),  # might have been stored
        (CREATE, 409, 1.0, 0, True),  # the key's first request is being stored
        (GET, 409, None, 0, False),
        (UNSAFE, 429, 2.0, 0, True),  # refused before anything was stored
        (CREATE, 429, 3600.0, 0, False),  # longer than the longest wait
        (CREATE, 400, None, 0, False),
        (CREATE, 422, None, 0, False),
        (GET, 503, 1.0, 2, False),  # retries used up
    ],
)
def test_retry_wait(call: _core.Call, status: int, retry_after: Optional[float], attempt: int, retried: bool) -> None:
    err = error_for(status, {"error": "x"}, retry_after=retry_after)
    wait = _core.retry_wait(call, attempt, err, S)
    assert (wait is not None) == retried
    if retried and retry_after is not None:
        assert wait == retry_after


def test_a_lost_connection_is_retried_only_when_safe() -> None:
    err = APIConnectionError("lost")
    assert _core.retry_wait(GET, 0, err, S) is not None
    assert _core.retry_wait(CREATE, 0, err, S) is not None
    assert _core.retry_wait(UNSAFE, 0, err, S) is None


def test_error_for_reads_code_and_field() -> None:
    e = error_for(400, {"error": "prompt is required.", "code": "invalid_field", "field": "prompt"}, request_id="r1")
    assert isinstance(e, arbiterhq.BadRequestError)
    assert (e.message, e.code, e.field, e.request_id) == ("prompt is required.", "invalid_field", "prompt", "r1")
    assert isinstance(error_for(502, None), arbiterhq.InternalServerError)
    assert isinstance(error_for(418, "teapot"), arbiterhq.ArbiterError)


TASK = {
    "id": "tsk_1", "status": "someday", "task_type": "decide", "source": "", "touchpoint": "chat",
    "prompt": "p", "allowed_verdicts": ["a"], "confidence_threshold": 0.8, "final_verdict": None,
    "final_tier": "fallback", "final_confidence": None, "created_at": 1.5, "completed_at": None,
    "deadline_at": None, "expired_at": None,
    "attempts": [{"tier": "agent", "verdict": None, "confidence": None, "rationale": "", "model": "rules",
                  "reviewer": None, "error": None, "started_at": 1.0, "finished_at": None, "audit": False,
                  "later": True}],
    "new_field": 7,
}


def test_task_reads_unknown_fields_and_statuses() -> None:
    t = arbiterhq.Task.from_dict(TASK)
    assert t.status == "someday" and not t.final
    assert t.final_tier == "fallback"
    assert t.extra == {"new_field": 7}
    assert t.attempts[0].extra == {"later": True}
    assert t.to_dict() == TASK
    assert t.response is None


def test_every_webhook_event_is_typed() -> None:
    task_event = {"type": "task.escalated", "timestamp": "2026-11-26T00:00:00Z", "data": TASK}
    drift = {"type": "calibration.drifted", "timestamp": "2026-11-26T00:00:00Z", "data": {
        "task_type": "refund", "task_id": "tsk_1", "audits": 40, "errors": 6, "error_rate": 0.15, "error_lower": 0.07,
        "target_error_rate": 0.05, "confidence": 0.95, "drifted_at": 1.5, "cleared_at": None}}
    vote = {"type": "task.vote_recorded", "timestamp": "2026-11-26T00:00:00Z",
            "data": {"task_id": "tsk_1", "votes": 1, "reviews_required": 3}}
    later = {"type": "account.renamed", "timestamp": "2026-11-26T00:00:00Z", "data": {"name": "x"}}
    e1 = arbiterhq.parse_webhook_event(task_event)
    assert isinstance(e1, arbiterhq.WebhookTaskEvent) and e1.data.id == "tsk_1"
    e2 = arbiterhq.parse_webhook_event(drift)
    assert isinstance(e2, arbiterhq.CalibrationDriftedEvent) and e2.data.error_rate == 0.15
    e3 = arbiterhq.parse_webhook_event(vote)
    assert isinstance(e3, arbiterhq.VoteRecordedEvent) and (e3.data.votes, e3.data.reviews_required) == (1, 3)
    e4 = arbiterhq.parse_webhook_event(later)
    assert isinstance(e4, arbiterhq.UnknownEvent) and e4.type == "account.renamed" and e4.data == {"name": "x"}
    for body in (task_event, drift, vote, later):
        assert arbiterhq.parse_webhook_event(body).to_dict() == body


def test_batch_body_gives_every_item_a_key() -> None:
    body, keys = _core.batch_body([{"prompt": "a", "allowed_verdicts": ["x"], "idempotency_key": "mine"},
                                   {"prompt": "b", "allowed_verdicts": ["x"]}])
    assert keys[0] == "mine" and keys[1].startswith("arbiterhq-")
    assert [t["idempotency_key"] for t in body["tasks"]] == keys
    with pytest.raises(TypeError):
        _core.task_body({"prompt": "p", "allowed_verdicts": "approve"})
