"""arbiterhq: the Python client of Arbiter, a verification task service.

An application asks a closed question with the verdicts it allows; Arbiter's
verifier answers first, and a person decides when it is not confident
enough::

    from arbiterhq import Arbiter

    with Arbiter() as arbiter:  # SVC_API_KEY, SVC_BASE_URL
        task = arbiter.ask("Approve this refund?", ["approve", "reject"],
                           {"order": "ord_1", "amount": 42.5}, wait=600)
        print(task.final_verdict, task.final_tier)
"""

from ._client import Arbiter, AsyncArbiter
from ._core import __version__
from ._errors import (
    APIConnectionError,
    ArbiterError,
    BadRequest,
    Conflict,
    IdempotencyMismatch,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServerError,
    Unauthorized,
    Unavailable,
    UnsupportedMediaType,
    WaitTimeout,
)
from ._models import (
    AGENT_RUNNING,
    COMPLETED,
    EXPIRED,
    FINAL_STATUSES,
    HUMAN_NEEDED,
    PENDING,
    TIER_AGENT,
    TIER_HUMAN,
    TIER_FALLBACK,
    Attempt,
    Task,
    TaskResult,
)
from ._webhooks import WebhookVerificationError, verify_webhook

__all__ = [
    "AGENT_RUNNING",
    "APIConnectionError",
    "Arbiter",
    "ArbiterError",
    "AsyncArbiter",
    "Attempt",
    "BadRequest",
    "COMPLETED",
    "Conflict",
    "EXPIRED",
    "FINAL_STATUSES",
    "HUMAN_NEEDED",
    "IdempotencyMismatch",
    "NotFound",
    "PENDING",
    "PayloadTooLarge",
    "RateLimited",
    "ServerError",
    "TIER_AGENT",
    "TIER_HUMAN",
    "TIER_FALLBACK",
    "Task",
    "TaskResult",
    "Unauthorized",
    "Unavailable",
    "UnsupportedMediaType",
    "WaitTimeout",
    "WebhookVerificationError",
    "__version__",
    "verify_webhook",
]
