"""arbiterhq: the Python client of Arbiter, a verification task service.

An application asks a closed question with the verdicts it allows; Arbiter's
verifier answers first, and a person decides when it is not confident
enough::

    from arbiterhq import Arbiter

    with Arbiter() as arbiter:  # SVC_API_KEY (or ARBITER_API_KEY), SVC_BASE_URL
        task = arbiter.ask("Approve this refund?", ["approve", "reject"],
                           {"order": "ord_1", "amount": 42.5}, wait=600)
        print(task.final_verdict, task.final_tier)

The API's resources hang off the client: ``arbiter.tasks`` (create,
create_batch, get, wait, list), ``arbiter.policies`` (list, get, update,
delete), ``arbiter.calibration.get()`` and ``arbiter.agreement.get()``.

A task with an ``action`` is approved for exactly one call:
``approved_action(task, "approve")`` returns it, its digest checked, and
``verify_receipt(task.receipt, jwks)`` checks the decision's signature
offline (see _integrity).
"""

from ._base import (
    AGENT_RUNNING,
    COMPLETED,
    EXPIRED,
    FINAL_STATUSES,
    HUMAN_NEEDED,
    PENDING,
    TIER_AGENT,
    TIER_FALLBACK,
    TIER_HUMAN,
    Response,
)
from ._client import (
    Agreement,
    Arbiter,
    AsyncAgreement,
    AsyncArbiter,
    AsyncCalibration,
    AsyncPolicies,
    AsyncReceipts,
    AsyncTasks,
    Calibration,
    Policies,
    Receipts,
    Tasks,
)
from ._core import DEFAULT_WAIT, TaskResult, __version__
from ._errors import (
    APIConnectionError,
    ArbiterError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    IdempotencyMismatchError,
    InternalServerError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitError,
    ServiceUnavailableError,
    UnsupportedMediaTypeError,
    WaitTimeoutError,
)
from ._integrity import (
    ActionDigestMismatch,
    ActionIntegrityError,
    ActionNotApproved,
    ReceiptClaims,
    ReceiptInvalid,
    action_digest,
    approved_action,
    canonical_json,
    check_call,
    verify_receipt,
)
from . import _models
from ._models import *  # noqa: F403 (the generated models, every one)
from ._pages import AsyncTaskPage, AsyncTaskPager, TaskPage
from ._resume import Decision, MemoryResumeStore, ResumeStore, SQLResumeStore
from ._webhooks import UnknownEvent, WebhookEvent, WebhookVerificationError, parse_webhook_event, verify_webhook

__all__ = [
    "AGENT_RUNNING",
    "ActionDigestMismatch",
    "ActionIntegrityError",
    "ActionNotApproved",
    "ReceiptClaims",
    "ReceiptInvalid",
    "action_digest",
    "approved_action",
    "canonical_json",
    "check_call",
    "verify_receipt",
    "APIConnectionError",
    "Agreement",
    "Arbiter",
    "ArbiterError",
    "AsyncAgreement",
    "AsyncArbiter",
    "AsyncCalibration",
    "AsyncPolicies",
    "AsyncTaskPage",
    "AsyncTaskPager",
    "AsyncReceipts",
    "AsyncTasks",
    "AuthenticationError",
    "BadRequestError",
    "COMPLETED",
    "Calibration",
    "ConflictError",
    "DEFAULT_WAIT",
    "Decision",
    "EXPIRED",
    "FINAL_STATUSES",
    "HUMAN_NEEDED",
    "IdempotencyMismatchError",
    "InternalServerError",
    "MemoryResumeStore",
    "NotFoundError",
    "PENDING",
    "PayloadTooLargeError",
    "Policies",
    "RateLimitError",
    "Response",
    "ResumeStore",
    "SQLResumeStore",
    "ServiceUnavailableError",
    "TIER_AGENT",
    "TIER_FALLBACK",
    "TIER_HUMAN",
    "TaskPage",
    "TaskResult",
    "Receipts",
    "Tasks",
    "UnknownEvent",
    "UnsupportedMediaTypeError",
    "WaitTimeoutError",
    "WebhookEvent",
    "WebhookVerificationError",
    "__version__",
    "parse_webhook_event",
    "verify_webhook",
]
__all__ += _models.__all__
