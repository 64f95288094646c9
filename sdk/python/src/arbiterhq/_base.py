"""What the generated models share: the answer an object came in, the task
statuses and tiers, and the task's own conveniences."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, TypeVar

if TYPE_CHECKING:
    from ._models import Attempt

# Task statuses. A task is final when it is completed or expired; clients
# must tolerate statuses added later.
PENDING = "pending"
AGENT_RUNNING = "agent_running"
HUMAN_NEEDED = "human_needed"
COMPLETED = "completed"
EXPIRED = "expired"
FINAL_STATUSES = frozenset({COMPLETED, EXPIRED})

# Who decided a completed task.
TIER_AGENT = "agent"
TIER_HUMAN = "human"
# TIER_FALLBACK: the task's on-expiry outcome decided it when its deadline passed.
TIER_FALLBACK = "fallback"

_O = TypeVar("_O", bound="APIObject")

# The attribute of an object that holds the answer it came in.
_RESPONSE_ATTR = "_arbiter_response"


@dataclass(frozen=True)
class Response:
    """The HTTP answer an object came in: its status, its ``X-Request-Id``
    (quote it when you ask the operator about a call), whether the server
    answered a create from its idempotency key's first request
    (``Idempotent-Replayed: true``) instead of making a task, and its
    headers."""

    status_code: int
    request_id: Optional[str]
    replayed: bool
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_headers(cls, status_code: int, headers: Mapping[str, str]) -> "Response":
        """The answer's facts, from its status and headers (any case)."""
        h: Dict[str, str] = {k.lower(): v for k, v in headers.items()}
        return cls(status_code, h.get("x-request-id"), h.get("idempotent-replayed") == "true", h)


class APIObject:
    """An object of the API. ``response`` is the answer it came in when a
    call returned it (None for an object nested in another, or read from a
    webhook)."""

    @property
    def response(self) -> Optional[Response]:
        """The answer this object came in, or None."""
        r = self.__dict__.get(_RESPONSE_ATTR)
        return r if isinstance(r, Response) else None

    def _with_response(self: _O, response: Response) -> _O:
        # The dataclasses are frozen; the answer is no field of theirs.
        object.__setattr__(self, _RESPONSE_ATTR, response)
        return self


class TaskMixin:
    """What a Task answers beyond its fields."""

    if TYPE_CHECKING:
        status: str
        final_verdict: Optional[str]
        final_tier: Optional[str]
        attempts: List[Attempt]

    @property
    def final(self) -> bool:
        """Whether the task is in a final state (completed or expired)."""
        return self.status in FINAL_STATUSES

    @property
    def rationale(self) -> str:
        """The reason given with the deciding answer ("" when none): the
        rationale of the last attempt that gave the final verdict."""
        if self.final_verdict is None:
            return ""
        for a in reversed(self.attempts):
            if not a.audit and a.verdict == self.final_verdict and a.tier == self.final_tier:
                return a.rationale
        return ""
