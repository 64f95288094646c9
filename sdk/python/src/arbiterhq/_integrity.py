"""Approval integrity: run exactly the action a task approved, and check a
decision's receipt offline.

``approved_action(task, "approve")`` returns the action the task's final
decision approved (a reviewer may have edited its arguments) after
recomputing its digest, the SHA-256 of the RFC 8785 (JCS) form of
``{"args": ..., "name": ...}``, from its name and arguments: a call whose
arguments changed after the approval is refused with ActionDigestMismatch.
``verify_receipt(receipt, jwks)`` checks a receipt's Ed25519 signature
against the server's keys (``/.well-known/arbiter/jwks.json``) and returns
its claims; it needs the ``cryptography`` package (``pip install
arbiterhq[receipts]``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Union

from ._base import COMPLETED
from ._models import ApprovedAction, Task

__all__ = [
    "ActionDigestMismatch",
    "ActionIntegrityError",
    "ActionNotApproved",
    "ReceiptClaims",
    "ReceiptInvalid",
    "action_digest",
    "approved_action",
    "canonical_json",
    "verify_receipt",
]

# RECEIPT_TYPE is the "typ" of a receipt's JWS header.
RECEIPT_TYPE = "arbiter-receipt+jws"

_MAX_SAFE_INTEGER = 2**53 - 1


class ActionIntegrityError(Exception):
    """An action that must not run: the base of the errors below."""


class ActionNotApproved(ActionIntegrityError):
    """The task approved no action: it is not completed, has no action, or
    its verdict is not one of those that approve."""


class ActionDigestMismatch(ActionIntegrityError):
    """The action's name and arguments are not the ones its digest (or the
    approved digest) names: they changed after the approval."""


class ReceiptInvalid(Exception):
    """A receipt that does not verify: malformed, signed by no key of the
    set, or changed after it was signed."""


def canonical_json(value: Any) -> str:
    """The RFC 8785 (JCS) form of a JSON value: members sorted by their
    names' UTF-16 code units, no whitespace, strings and numbers as
    ECMAScript writes them. Raises ValueError for what has no such form
    (NaN, infinities, integers beyond ±(2^53−1), lone surrogates)."""
    out: List[str] = []
    _write(value, out)
    return "".join(out)


def _write(v: Any, out: List[str]) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, str):
        out.append(_string(v))
    elif isinstance(v, int):
        if abs(v) > _MAX_SAFE_INTEGER:
            raise ValueError(f"the integer {v} is beyond ±(2^53−1): a double would round it")
        out.append(str(v))
    elif isinstance(v, float):
        out.append(_number(v))
    elif isinstance(v, Mapping):
        out.append("{")
        for i, k in enumerate(sorted(v, key=_utf16)):
            if not isinstance(k, str):
                raise ValueError("object member names must be strings")
            if i:
                out.append(",")
            out.append(_string(k))
            out.append(":")
            _write(v[k], out)
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise ValueError(f"{type(v).__name__} is not a JSON value")


def _utf16(s: str) -> bytes:
    try:
        return s.encode("utf-16-be")
    except UnicodeEncodeError as e:
        raise ValueError("a string holds a lone surrogate") from e


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _string(s: str) -> str:
    _utf16(s)  # refuses lone surrogates
    parts = ['"']
    for ch in s:
        if ch in _ESCAPES:
            parts.append(_ESCAPES[ch])
        elif ch < " ":
            parts.append(f"\\u{ord(ch):04x}")
        else:
            parts.append(ch)
    parts.append('"')
    return "".join(parts)


def _number(f: float) -> str:
    """ECMAScript's Number.prototype.toString of a double (RFC 8785
    §3.2.2.3): the shortest digits that read back as f, in plain notation
    from 1e-6 to 1e21 and in exponent notation outside."""
    if math.isnan(f) or math.isinf(f):
        raise ValueError("NaN and infinities have no JSON form")
    if f == 0:
        return "0"
    sign = "-" if f < 0 else ""
    # repr gives the shortest round-trip digits, as ECMAScript does.
    mantissa, _, exp = repr(abs(f)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    # The exponent n of 0.d1d2…dk × 10^n.
    n = len(whole.lstrip("0")) if whole.lstrip("0") else -(len(frac) - len(frac.lstrip("0")))
    n += int(exp) if exp else 0
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        s = digits + "0" * (n - k)
    elif 0 < n <= 21:
        s = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        s = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        s = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + s


def action_digest(name: str, args: Mapping[str, Any]) -> str:
    """The digest the server gives the action ``name(args)``: ``sha256:``
    and the hex SHA-256 of the RFC 8785 form of ``{"args", "name"}``."""
    text = canonical_json({"args": args, "name": name})
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def approved_action(task: Task, *approving: str) -> ApprovedAction:
    """The action the task's final decision approved, checked: its digest
    recomputed from its name and arguments must be its own. ``approving``
    names the verdicts that approve (none given: any final verdict).
    Raises ActionNotApproved when the task is not completed with one of
    them or approved no action, and ActionDigestMismatch when the digest
    does not match: then nothing must run."""
    a = task.approved_action
    if task.status != COMPLETED or a is None or task.final_verdict is None:
        raise ActionNotApproved(f"task {task.id} approved no action ({task.status})")
    if approving and task.final_verdict not in approving:
        raise ActionNotApproved(f"task {task.id} was decided {task.final_verdict!r}, which does not approve")
    try:
        digest = action_digest(a.name, a.args)
    except ValueError as e:
        raise ActionDigestMismatch(f"the approved action of {task.id} has no canonical form: {e}") from e
    if digest != a.digest:
        raise ActionDigestMismatch(f"the approved action of {task.id} is not the one its digest names")
    return a


def check_call(task: Task, name: str, args: Mapping[str, Any], *approving: str) -> ApprovedAction:
    """The action to run for a call ``name(args)`` that ``task`` was asked
    about: the call must be the task's proposed action (its digest the
    proposal's), and the approved action (approved_action) is what runs,
    with a reviewer's edits. Raises ActionDigestMismatch for a call that
    is not the one asked about (its arguments changed since), and
    ActionNotApproved as approved_action does."""
    approved = approved_action(task, *approving)
    proposed = task.action.digest if task.action is not None else approved.proposed_digest
    try:
        digest = action_digest(name, args)
    except ValueError as e:
        raise ActionDigestMismatch(f"the call of {name} has no canonical form: {e}") from e
    if digest != proposed:
        raise ActionDigestMismatch(f"the call of {name} is not the one task {task.id} asked about: its arguments changed")
    return approved


@dataclass(frozen=True)
class ReceiptClaims:
    """What a receipt signs: the decision, its place in the account's chain
    (seq) and the hash of the receipt before it (prev)."""

    task_id: str
    account: str
    verdict: str
    tier: str
    decided_by: str
    action_digest: Optional[str]
    decided_at: float
    seq: int
    prev: Optional[str]


def _b64(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def verify_receipt(receipt: str, jwks: Union[Mapping[str, Any], Any]) -> ReceiptClaims:
    """Checks a receipt against the keys (a JWKS: the mapping served at
    ``/.well-known/arbiter/jwks.json``, or the JWKS model) and returns its
    claims. Raises ReceiptInvalid for a receipt that does not verify."""
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError as e:  # pragma: no cover - a missing extra
        raise ImportError("verify_receipt needs the cryptography package: pip install arbiterhq[receipts]") from e
    keys = jwks.to_dict() if hasattr(jwks, "to_dict") else jwks
    parts = receipt.split(".")
    if len(parts) != 3:
        raise ReceiptInvalid("a receipt is three base64url parts separated by dots")
    try:
        header = json.loads(_b64(parts[0]))
        payload = json.loads(_b64(parts[1]))
        signature = _b64(parts[2])
    except (ValueError, TypeError) as e:
        raise ReceiptInvalid("a receipt's parts are base64url JSON") from e
    if not isinstance(header, dict) or header.get("alg") != "EdDSA" or header.get("typ") != RECEIPT_TYPE:
        raise ReceiptInvalid(f"the header is not a receipt's (alg EdDSA, typ {RECEIPT_TYPE})")
    key = next((k for k in keys.get("keys", []) if k.get("kid") == header.get("kid")
                and k.get("kty") == "OKP" and k.get("crv") == "Ed25519"), None)
    if key is None:
        raise ReceiptInvalid(f"no key has the id {header.get('kid')}")
    try:
        Ed25519PublicKey.from_public_bytes(_b64(key["x"])).verify(signature, f"{parts[0]}.{parts[1]}".encode("ascii"))
    except (InvalidSignature, ValueError) as e:
        raise ReceiptInvalid("the signature does not match") from e
    fields = {f: payload.get(f) for f in ReceiptClaims.__dataclass_fields__}
    if set(payload) != set(fields) or not isinstance(fields["task_id"], str) or not isinstance(fields["seq"], int):
        raise ReceiptInvalid("the payload is not a receipt's claims")
    return ReceiptClaims(**fields)


def claims_dict(c: ReceiptClaims) -> Dict[str, Any]:
    """The claims as the receipt's payload has them."""
    return {f: getattr(c, f) for f in ReceiptClaims.__dataclass_fields__}
