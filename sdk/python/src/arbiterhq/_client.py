"""The clients: Arbiter (blocking) and AsyncArbiter (asyncio), with the same
resources and methods: ``tasks``, ``policies``, ``calibration`` and
``agreement``, and ``ask`` for the common case. Every create carries an
idempotency key (the caller's, or one made per call), so a create whose
answer was lost is retried without making a second task."""

from __future__ import annotations

import asyncio
import copy
import time
from typing import TYPE_CHECKING, Any, List, Optional, Sequence

import httpx

from . import _core
from ._core import Answer, Call, Settings, TaskResult
from ._integrity import ReceiptClaims, verify_receipt
from ._models import JWKS, AgreementReport, CalibrationReport, Policy, Task, TaskBatchItemParams
from ._pages import AsyncTaskPage, AsyncTaskPager, TaskPage

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._models import PolicyUpdateParams, TaskCreateOptions, TaskCreateParams


class Arbiter:
    """A blocking client of the Arbiter API.

    ``api_key`` defaults to ``SVC_API_KEY`` (else ``ARBITER_API_KEY``),
    ``base_url`` to ``SVC_BASE_URL`` (else ``ARBITER_BASE_URL``, else
    http://localhost:8080). ``timeout`` bounds each request in seconds (a
    long-poll gets its wait on top); ``max_retries`` and ``max_retry_wait``
    bound the retries of 429, 5xx, 409 and lost connections.
    ``with_options`` gives a client with other settings for some calls. Use
    it as a context manager, or call ``close()``."""

    tasks: "Tasks"
    policies: "Policies"
    calibration: "Calibration"
    agreement: "Agreement"

    def __init__(
        self,
        api_key: Optional[str] = None,
        *,
        base_url: Optional[str] = None,
        timeout: float = _core.DEFAULT_TIMEOUT,
        max_retries: int = _core.DEFAULT_MAX_RETRIES,
        max_retry_wait: float = _core.DEFAULT_MAX_RETRY_WAIT,
        http_client: Optional[httpx.Client] = None,
    ) -> None:
        self._s: Settings = _core.resolve_settings(api_key, base_url, timeout, max_retries, max_retry_wait)
        self._http = http_client or httpx.Client()
        self._own_http = http_client is None
        self._bind()

    def _bind(self) -> None:
        self.tasks = Tasks(self)
        self.policies = Policies(self)
        self.calibration = Calibration(self)
        self.agreement = Agreement(self)
        self.receipts = Receipts(self)

    @property
    def base_url(self) -> str:
        """The server's address, without a trailing slash."""
        return self._s.base_url

    def with_options(
        self,
        *,
        timeout: Optional[float] = None,
        max_retries: Optional[int] = None,
        max_retry_wait: Optional[float] = None,
    ) -> "Arbiter":
        """A client like this one with the options given replaced, for the
        calls made through it (``client.with_options(timeout=5).tasks.get(id)``).
        It shares this client's connections; closing it closes nothing."""
        other = copy.copy(self)
        other._s = _core.with_options(self._s, timeout, max_retries, max_retry_wait)
        other._own_http = False
        other._bind()
        return other

    def close(self) -> None:
        """Closes the HTTP connections the client opened."""
        if self._own_http:
            self._http.close()

    def __enter__(self) -> "Arbiter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, call: Call) -> Answer:
        attempt = 0
        while True:
            try:
                got = _core.read_answer(call, self._http.send(call.request(self._http, self._s)))
            except httpx.TransportError as e:
                err = _core.connection_error(call, e)
                cause: Optional[BaseException] = e
            else:
                if isinstance(got, Answer):
                    return got
                err, cause = got, None
            wait = _core.retry_wait(call, attempt, err, self._s)
            if wait is None:
                raise err from cause
            time.sleep(wait)
            attempt += 1

    def ask(
        self,
        prompt: str,
        allowed_verdicts: Sequence[str],
        context: Any = None,
        *,
        wait: Optional[float] = _core.DEFAULT_WAIT,
        idempotency_key: Optional[str] = None,
        **fields: "Unpack[TaskCreateOptions]",
    ) -> Task:
        """Asks and waits for the answer: creates the task (with an
        idempotency key, so a retry never asks twice) and waits up to
        ``wait`` seconds (10 minutes unless given; None: until it is final)
        for it to be completed or expired; past it, WaitTimeoutError
        carries the task as last read. ``fields`` are the create's other
        fields (``confidence_threshold``, ``task_type``,
        ``deadline_seconds``, …)."""
        task = self.tasks.create(
            prompt=prompt, allowed_verdicts=allowed_verdicts, context=context,
            idempotency_key=idempotency_key, **fields,
        )
        if task.final:
            return task
        return self.tasks.wait(task.id, timeout=wait)


class Tasks:
    """The account's tasks: ``client.tasks``."""

    def __init__(self, client: Arbiter) -> None:
        self._c = client

    def create(self, *, idempotency_key: Optional[str] = None, **params: "Unpack[TaskCreateParams]") -> Task:
        """Creates a task and returns it (``prompt`` and ``allowed_verdicts``
        required; every field of TaskCreateParams). Fields left out (or
        None) take the task type's policy's values, or the server's
        defaults. With ``idempotency_key`` a repeat of the same create
        returns the task that key made (``task.response.replayed``);
        without one, the client makes a key for the call so that its
        retries make one task."""
        key = idempotency_key or _core.new_idempotency_key()
        a = self._c._send(Call("POST", "/v1/tasks", body=_core.task_body(params), idempotency_key=key, repeatable=True))
        return Task.from_dict(a.data)._with_response(a.response)

    def create_batch(self, items: Sequence[TaskBatchItemParams]) -> List[TaskResult]:
        """Creates up to 100 tasks in one request. Each item holds a
        create's fields and, optionally, its ``idempotency_key`` (one is
        made for each item without); the answer has one TaskResult per
        item, in order: the task, or the item's error."""
        body, _ = _core.batch_body(items)
        a = self._c._send(Call("POST", "/v1/tasks/batch", body=body, repeatable=True))
        return _core.batch_results(a.data, a.response.request_id)

    def get(self, task_id: str, *, wait: Optional[int] = None) -> Task:
        """Reads a task. With ``wait`` (0 to 60 seconds) the server answers
        as soon as the task is final, or after that long as it is then."""
        params = None if not wait else {"wait": wait}
        timeout = None if not wait else self._c._s.timeout + wait
        a = self._c._send(Call("GET", _core.task_path(task_id), params=params, timeout=timeout))
        return Task.from_dict(a.data)._with_response(a.response)

    def wait(self, task_id: str, *, timeout: Optional[float] = _core.DEFAULT_WAIT) -> Task:
        """Waits until the task is completed or expired, long-polling, and
        returns it. ``timeout`` (seconds; 10 minutes unless given) bounds
        the wait and is never cut short; past it, WaitTimeoutError carries
        the task as last read. None waits as long as it takes, which for a
        person may be days."""
        deadline = _core.wait_deadline(timeout)
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            last = self.get(task_id, wait=_core.long_poll_seconds(remaining))
            if last.final:
                return last
            if deadline is not None and time.monotonic() >= deadline:
                raise _core.wait_timeout(task_id, last)

    def list(
        self,
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
    ) -> TaskPage:
        """The first page (``limit`` tasks, 1 to 100; the server's 20 when
        left out) of the account's tasks that match the filters, newest
        first, after the task ``starting_after`` when given. Iterate the
        page for every matching task, page after page."""
        params = _core.list_params(
            status=status, task_type=task_type, source=source, touchpoint=touchpoint, final_tier=final_tier,
            created_after=created_after, created_before=created_before, limit=limit, starting_after=starting_after,
        )

        def fetch(cursor: Optional[str]) -> TaskPage:
            q = params if cursor is None else {**params, "starting_after": cursor}
            a = self._c._send(Call("GET", "/v1/tasks", params=q))
            return TaskPage(a.data, a.response, fetch)

        return fetch(None)


class Policies:
    """The account's policies, by task type: ``client.policies``."""

    def __init__(self, client: Arbiter) -> None:
        self._c = client

    def list(self) -> List[Policy]:
        """The account's policies."""
        a = self._c._send(Call("GET", "/v1/policies"))
        return [Policy.from_dict(p)._with_response(a.response) for p in a.data["policies"]]

    def get(self, task_type: str) -> Policy:
        """The policy of the task type ("default" for the default policy);
        NotFoundError without one."""
        a = self._c._send(Call("GET", _core.policy_path(task_type)))
        return Policy.from_dict(a.data)._with_response(a.response)

    def update(self, task_type: str, **params: "Unpack[PolicyUpdateParams]") -> Policy:
        """Replaces the policy of the task type with ``params`` (a field
        left out or None is not set) and returns it. A create that leaves a
        field out takes the policy's; tasks already created keep their
        values."""
        body = _core.drop_none(params)
        a = self._c._send(Call("PUT", _core.policy_path(task_type), body=body, repeatable=True))
        return Policy.from_dict(a.data)._with_response(a.response)

    def delete(self, task_type: str) -> None:
        """Deletes the policy of the task type; NotFoundError without one."""
        self._c._send(Call("DELETE", _core.policy_path(task_type)))


class Calibration:
    """The agent tier's calibration against people's audits: ``client.calibration``."""

    def __init__(self, client: Arbiter) -> None:
        self._c = client

    def get(
        self,
        *,
        task_type: Optional[str] = None,
        source: Optional[str] = None,
        model: Optional[str] = None,
        version: Optional[str] = None,
        created_after: Optional[float] = None,
        created_before: Optional[float] = None,
        target_error_rate: Optional[float] = None,
        confidence: Optional[float] = None,
    ) -> CalibrationReport:
        """The calibration report of the tasks that match the filters."""
        params = _core.calibration_params(
            task_type=task_type, source=source, model=model, version=version, created_after=created_after,
            created_before=created_before, target_error_rate=target_error_rate, confidence=confidence,
        )
        a = self._c._send(Call("GET", "/v1/calibration", params=params))
        return CalibrationReport.from_dict(a.data)._with_response(a.response)


class Agreement:
    """How often the account's reviewers agree: ``client.agreement``."""

    def __init__(self, client: Arbiter) -> None:
        self._c = client

    def get(self, *, days: Optional[int] = None) -> AgreementReport:
        """The agreement report of the last ``days`` days (1 to 365; the
        server's default when left out)."""
        a = self._c._send(Call("GET", "/v1/agreement", params=_core.drop_none({"days": days})))
        return AgreementReport.from_dict(a.data)._with_response(a.response)


class Receipts:
    """The receipts of final decisions: ``client.receipts``. A task's
    ``receipt`` is a compact JWS that anyone can check offline with the
    server's public keys (verify_receipt)."""

    def __init__(self, client: Arbiter) -> None:
        self._c = client

    def keys(self) -> JWKS:
        """The public keys that sign receipts (the JWKS at
        /.well-known/arbiter/jwks.json): keep them with the receipts you
        keep, since a rotation adds keys."""
        a = self._c._send(Call("GET", "/.well-known/arbiter/jwks.json"))
        return JWKS.from_dict(a.data)._with_response(a.response)

    def verify(self, receipt: str) -> ReceiptClaims:
        """Checks a receipt against the server's keys (fetched now) and
        returns its claims; raises ReceiptInvalid when it does not verify."""
        return verify_receipt(receipt, self.keys())


class AsyncArbiter:
    """The asyncio client: Arbiter's resources and methods as coroutines.
    Use it as an async context manager, or await ``aclose()``."""

    tasks: "AsyncTasks"
    policies: "AsyncPolicies"
    calibration: "AsyncCalibration"
    agreement: "AsyncAgreement"

    def __init__(
        self,
        api_key: Optional[str] = None,
        *,
        base_url: Optional[str] = None,
        timeout: float = _core.DEFAULT_TIMEOUT,
        max_retries: int = _core.DEFAULT_MAX_RETRIES,
        max_retry_wait: float = _core.DEFAULT_MAX_RETRY_WAIT,
        http_client: Optional[httpx.AsyncClient] = None,
    ) -> None:
        self._s: Settings = _core.resolve_settings(api_key, base_url, timeout, max_retries, max_retry_wait)
        self._http = http_client or httpx.AsyncClient()
        self._own_http = http_client is None
        self._bind()

    def _bind(self) -> None:
        self.tasks = AsyncTasks(self)
        self.policies = AsyncPolicies(self)
        self.calibration = AsyncCalibration(self)
        self.agreement = AsyncAgreement(self)
        self.receipts = AsyncReceipts(self)

    @property
    def base_url(self) -> str:
        """The server's address, without a trailing slash."""
        return self._s.base_url

    def with_options(
        self,
        *,
        timeout: Optional[float] = None,
        max_retries: Optional[int] = None,
        max_retry_wait: Optional[float] = None,
    ) -> "AsyncArbiter":
        """See Arbiter.with_options."""
        other = copy.copy(self)
        other._s = _core.with_options(self._s, timeout, max_retries, max_retry_wait)
        other._own_http = False
        other._bind()
        return other

    async def aclose(self) -> None:
        """Closes the HTTP connections the client opened."""
        if self._own_http:
            await self._http.aclose()

    async def __aenter__(self) -> "AsyncArbiter":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, call: Call) -> Answer:
        attempt = 0
        while True:
            try:
                got = _core.read_answer(call, await self._http.send(call.request(self._http, self._s)))
            except httpx.TransportError as e:
                err = _core.connection_error(call, e)
                cause: Optional[BaseException] = e
            else:
                if isinstance(got, Answer):
                    return got
                err, cause = got, None
            wait = _core.retry_wait(call, attempt, err, self._s)
            if wait is None:
                raise err from cause
            await asyncio.sleep(wait)
            attempt += 1

    async def ask(
        self,
        prompt: str,
        allowed_verdicts: Sequence[str],
        context: Any = None,
        *,
        wait: Optional[float] = _core.DEFAULT_WAIT,
        idempotency_key: Optional[str] = None,
        **fields: "Unpack[TaskCreateOptions]",
    ) -> Task:
        """See Arbiter.ask."""
        task = await self.tasks.create(
            prompt=prompt, allowed_verdicts=allowed_verdicts, context=context,
            idempotency_key=idempotency_key, **fields,
        )
        if task.final:
            return task
        return await self.tasks.wait(task.id, timeout=wait)


class AsyncTasks:
    """Tasks for the asyncio client: ``client.tasks``."""

    def __init__(self, client: AsyncArbiter) -> None:
        self._c = client

    async def create(self, *, idempotency_key: Optional[str] = None, **params: "Unpack[TaskCreateParams]") -> Task:
        """See Tasks.create."""
        key = idempotency_key or _core.new_idempotency_key()
        a = await self._c._send(Call("POST", "/v1/tasks", body=_core.task_body(params), idempotency_key=key, repeatable=True))
        return Task.from_dict(a.data)._with_response(a.response)

    async def create_batch(self, items: Sequence[TaskBatchItemParams]) -> List[TaskResult]:
        """See Tasks.create_batch."""
        body, _ = _core.batch_body(items)
        a = await self._c._send(Call("POST", "/v1/tasks/batch", body=body, repeatable=True))
        return _core.batch_results(a.data, a.response.request_id)

    async def get(self, task_id: str, *, wait: Optional[int] = None) -> Task:
        """See Tasks.get."""
        params = None if not wait else {"wait": wait}
        timeout = None if not wait else self._c._s.timeout + wait
        a = await self._c._send(Call("GET", _core.task_path(task_id), params=params, timeout=timeout))
        return Task.from_dict(a.data)._with_response(a.response)

    async def wait(self, task_id: str, *, timeout: Optional[float] = _core.DEFAULT_WAIT) -> Task:
        """See Tasks.wait."""
        deadline = _core.wait_deadline(timeout)
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            last = await self.get(task_id, wait=_core.long_poll_seconds(remaining))
            if last.final:
                return last
            if deadline is not None and time.monotonic() >= deadline:
                raise _core.wait_timeout(task_id, last)

    def list(
        self,
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
    ) -> AsyncTaskPager:
        """See Tasks.list: ``await`` it for the first page, or ``async for``
        over it for every matching task."""
        params = _core.list_params(
            status=status, task_type=task_type, source=source, touchpoint=touchpoint, final_tier=final_tier,
            created_after=created_after, created_before=created_before, limit=limit, starting_after=starting_after,
        )

        async def fetch(cursor: Optional[str]) -> AsyncTaskPage:
            q = params if cursor is None else {**params, "starting_after": cursor}
            a = await self._c._send(Call("GET", "/v1/tasks", params=q))
            return AsyncTaskPage(a.data, a.response, fetch)

        return AsyncTaskPager(lambda: fetch(None))


class AsyncPolicies:
    """Policies for the asyncio client: ``client.policies``."""

    def __init__(self, client: AsyncArbiter) -> None:
        self._c = client

    async def list(self) -> List[Policy]:
        """See Policies.list."""
        a = await self._c._send(Call("GET", "/v1/policies"))
        return [Policy.from_dict(p)._with_response(a.response) for p in a.data["policies"]]

    async def get(self, task_type: str) -> Policy:
        """See Policies.get."""
        a = await self._c._send(Call("GET", _core.policy_path(task_type)))
        return Policy.from_dict(a.data)._with_response(a.response)

    async def update(self, task_type: str, **params: "Unpack[PolicyUpdateParams]") -> Policy:
        """See Policies.update."""
        body = _core.drop_none(params)
        a = await self._c._send(Call("PUT", _core.policy_path(task_type), body=body, repeatable=True))
        return Policy.from_dict(a.data)._with_response(a.response)

    async def delete(self, task_type: str) -> None:
        """See Policies.delete."""
        await self._c._send(Call("DELETE", _core.policy_path(task_type)))


class AsyncCalibration:
    """Calibration for the asyncio client: ``client.calibration``."""

    def __init__(self, client: AsyncArbiter) -> None:
        self._c = client

    async def get(
        self,
        *,
        task_type: Optional[str] = None,
        source: Optional[str] = None,
        model: Optional[str] = None,
        version: Optional[str] = None,
        created_after: Optional[float] = None,
        created_before: Optional[float] = None,
        target_error_rate: Optional[float] = None,
        confidence: Optional[float] = None,
    ) -> CalibrationReport:
        """See Calibration.get."""
        params = _core.calibration_params(
            task_type=task_type, source=source, model=model, version=version, created_after=created_after,
            created_before=created_before, target_error_rate=target_error_rate, confidence=confidence,
        )
        a = await self._c._send(Call("GET", "/v1/calibration", params=params))
        return CalibrationReport.from_dict(a.data)._with_response(a.response)


class AsyncAgreement:
    """Agreement for the asyncio client: ``client.agreement``."""

    def __init__(self, client: AsyncArbiter) -> None:
        self._c = client

    async def get(self, *, days: Optional[int] = None) -> AgreementReport:
        """See Agreement.get."""
        a = await self._c._send(Call("GET", "/v1/agreement", params=_core.drop_none({"days": days})))
        return AgreementReport.from_dict(a.data)._with_response(a.response)


class AsyncReceipts:
    """Receipts for the asyncio client: ``client.receipts``."""

    def __init__(self, client: AsyncArbiter) -> None:
        self._c = client

    async def keys(self) -> JWKS:
        """See Receipts.keys."""
        a = await self._c._send(Call("GET", "/.well-known/arbiter/jwks.json"))
        return JWKS.from_dict(a.data)._with_response(a.response)

    async def verify(self, receipt: str) -> ReceiptClaims:
        """See Receipts.verify."""
        return verify_receipt(receipt, await self.keys())


__all__ = [
    "Agreement",
    "AsyncReceipts",
    "Receipts",
    "Arbiter",
    "AsyncAgreement",
    "AsyncArbiter",
    "AsyncCalibration",
    "AsyncPolicies",
    "AsyncTasks",
    "Calibration",
    "Policies",
    "Tasks",
]
