"""Typed errors: one class per way a call can fail."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Optional

if TYPE_CHECKING:
    from ._models import Task


class ArbiterError(Exception):
    """A call failed. ``status`` is the HTTP status (0 when no answer came),
    ``message`` the server's sentence, ``code`` and ``field`` its
    machine-readable reason when the server sends them, ``request_id`` the
    ``X-Request-Id`` of the answer and ``retry_after`` the seconds the server
    asked the caller to wait (or None)."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        code: Optional[str] = None,
        field: Optional[str] = None,
        request_id: Optional[str] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.field = field
        self.request_id = request_id
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, message={self.message!r})"


class BadRequestError(ArbiterError):
    """400: the request is not valid; ``field`` names the field when known."""


class AuthenticationError(ArbiterError):
    """401: no key, or a malformed, unknown or revoked one."""


class NotFoundError(ArbiterError):
    """404: the task is unknown or another account's (not told apart)."""


class ConflictError(ArbiterError):
    """409: another request with the same idempotency key is being stored,
    or the task is already decided; ``retry_after`` says when to try again."""


class IdempotencyMismatchError(ArbiterError):
    """422: the idempotency key was used for a different request."""


class PayloadTooLargeError(ArbiterError):
    """413: the body is over the server's limit."""


class UnsupportedMediaTypeError(ArbiterError):
    """415: the body was not sent as JSON."""


class RateLimitError(ArbiterError):
    """429: the daily task cap or a per-client limit; ``retry_after`` says
    when to try again."""


class ServiceUnavailableError(ArbiterError):
    """503: the server or its store is not answering now; a create may or
    may not have been stored, so it is retried with the same idempotency
    key."""


class InternalServerError(ArbiterError):
    """Any other 5xx."""


class APIConnectionError(ArbiterError):
    """No answer came: the connection failed or the request timed out."""


class WaitTimeoutError(ArbiterError):
    """The task was not final within the time the caller gave; ``task`` is
    the task as last read (None if it never was)."""

    def __init__(self, message: str, task: Optional["Task"]) -> None:
        super().__init__(message)
        self.task = task


_BY_STATUS: Mapping[int, type] = {
    400: BadRequestError,
    401: AuthenticationError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    415: UnsupportedMediaTypeError,
    422: IdempotencyMismatchError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def error_for(
    status: int,
    body: Any,
    *,
    request_id: Optional[str] = None,
    retry_after: Optional[float] = None,
) -> ArbiterError:
    """The typed error for an answer with this status and decoded body."""
    message = f"the server answered HTTP {status}"
    code: Optional[str] = None
    field: Optional[str] = None
    if isinstance(body, dict):
        if isinstance(body.get("error"), str) and body["error"]:
            message = body["error"]
        if isinstance(body.get("code"), str):
            code = body["code"]
        if isinstance(body.get("field"), str):
            field = body["field"]
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = InternalServerError if status >= 500 else ArbiterError
    err: ArbiterError = cls(
        message,
        status=status,
        code=code,
        field=field,
        request_id=request_id,
        retry_after=retry_after,
    )
    return err
