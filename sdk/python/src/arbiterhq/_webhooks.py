"""Standard Webhooks verification of the messages Arbiter sends."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any, Mapping, Optional, Union

from ._errors import ArbiterError

# How far a message's timestamp may be from now, either way, in seconds.
DEFAULT_TOLERANCE = 5 * 60


class WebhookVerificationError(ArbiterError):
    """A message is not one Arbiter signed with this secret, or is too old
    or too new to accept."""


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
) -> Any:
    """Checks a webhook message and returns its decoded JSON body.

    ``body`` is the raw request body exactly as received, ``headers`` the
    request's headers (any case), ``secret`` the endpoint's (or the
    callback) signing secret, ``whsec_…``. The signature is compared in
    constant time; any one of several signatures may match (both secrets
    sign for a day after a rotation). A timestamp more than ``tolerance``
    seconds from ``now`` is refused, so a captured message cannot be
    replayed later. Raises WebhookVerificationError when the message fails
    any check."""
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
        return json.loads(raw)
    except ValueError:
        raise WebhookVerificationError("the message's body is not JSON") from None
