"""Standard Webhooks verification of the messages Arbiter sends."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any, Dict, Mapping, Optional, Union

from ._base import APIObject
from ._errors import ArbiterError
from ._models import CalibrationDriftedEvent, PingEvent, VoteRecordedEvent, WebhookTaskEvent

# How far a message's timestamp may be from now, either way, in seconds.
DEFAULT_TOLERANCE = 5 * 60


class WebhookVerificationError(ArbiterError):
    """A message is not one Arbiter signed with this secret, or is too old
    or too new to accept."""


class UnknownEvent(APIObject):
    """An event of a type this SDK does not know (a later server's): its
    ``type``, ``timestamp`` and ``data`` as sent."""

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.type = str(body.get("type", ""))
        self.timestamp = str(body.get("timestamp", ""))
        self.data: Any = body.get("data")

    def to_dict(self) -> Dict[str, Any]:
        """The event as JSON."""
        return {"type": self.type, "timestamp": self.timestamp, "data": self.data}

    def __repr__(self) -> str:
        return f"UnknownEvent(type={self.type!r})"


#: An event as verify_webhook returns it: a task event (task.human_needed,
#: task.completed, task.expired, task.audit_disagreed, task.escalated),
#: calibration.drifted, task.vote_recorded, ping, or one of a type this SDK
#: does not know. Tell them apart by ``type`` or isinstance.
WebhookEvent = Union[WebhookTaskEvent, CalibrationDriftedEvent, VoteRecordedEvent, PingEvent, UnknownEvent]

_EVENTS: Dict[str, Any] = {
    "calibration.drifted": CalibrationDriftedEvent,
    "task.vote_recorded": VoteRecordedEvent,
    "ping": PingEvent,
}


def parse_webhook_event(body: Mapping[str, Any]) -> WebhookEvent:
    """The typed event of a message's decoded JSON body: the class its
    ``type`` names (any task.* event but task.vote_recorded is a
    WebhookTaskEvent, whose ``data`` is the Task)."""
    kind = str(body.get("type", ""))
    cls = _EVENTS.get(kind)
    if cls is not None:
        event: WebhookEvent = cls.from_dict(body)
        return event
    if kind.startswith("task.") and isinstance(body.get("data"), dict) and "id" in body["data"]:
        return WebhookTaskEvent.from_dict(body)
    return UnknownEvent(body)


def _header(headers: Mapping[str, str], name: str) -> str:
    for k, v in headers.items():
        if k.lower() == name:
            return v
    raise WebhookVerificationError(f"the {name} header is missing")


def _secret_bytes(secret: str) -> bytes:
    s = secret[len("whsec_"):] if secret.startswith("whsec_") else secret
    try:
        return base64.b64decode(s, validate=True)
    except ValueError as e:
        raise ValueError("the secret is not whsec_ and base64") from e


def verify_webhook(
    body: Union[bytes, str],
    headers: Mapping[str, str],
    secret: str,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: Optional[float] = None,
) -> WebhookEvent:
    """Checks a webhook message and returns its event.

    ``body`` is the raw request body exactly as received, ``headers`` the
    request's headers (any case), ``secret`` the endpoint's (or the
    callback) signing secret, ``whsec_…``. The signature is compared in
    constant time; any one of several signatures may match (both secrets
    sign for a day after a rotation). A timestamp more than ``tolerance``
    seconds from ``now`` is refused, so a captured message cannot be
    replayed later. Returns the typed event (WebhookEvent); raises
    WebhookVerificationError when the message fails any check."""
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    msg_id = _header(headers, "webhook-id")
    ts = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    try:
        sent = int(ts)
    except ValueError:
        raise WebhookVerificationError("the webhook-timestamp header is not a whole number") from None
    current = time.time() if now is None else now
    if abs(current - sent) > tolerance:
        raise WebhookVerificationError("the message's timestamp is outside the tolerance")
    key = _secret_bytes(secret)
    signed = msg_id.encode("utf-8") + b"." + ts.encode("utf-8") + b"." + raw
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
    matched = False
    for sig in signatures.split():
        version, _, value = sig.partition(",")
        if version != "v1":
            continue
        # Every signature is compared, so the time taken does not tell which
        # one matched.
        if hmac.compare_digest(expected, value.encode("utf-8")):
            matched = True
    if not matched:
        raise WebhookVerificationError("no signature matches the message")
    try:
        body = json.loads(raw)
    except ValueError:
        raise WebhookVerificationError("the message's body is not JSON") from None
    if not isinstance(body, dict):
        raise WebhookVerificationError("the message's body is not a JSON object")
    try:
        return parse_webhook_event(body)
    except (KeyError, TypeError, ValueError):
        raise WebhookVerificationError("the message's body is not an event this SDK can read") from None
