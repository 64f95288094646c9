"""The clients: Arbiter (blocking) and AsyncArbiter (asyncio), with the same
methods. Every create carries an idempotency key (the caller's, or one made
per call), so a create whose answer was lost is retried without making a
second task."""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Dict, Iterator, List, Mapping, Optional, Sequence

import httpx

from . import _core
from ._core import Call, Settings
from ._errors import ArbiterError, WaitTimeout
from ._models import Task, TaskResult


def _wait_timeout(task_id: str, last: Optional[Task]) -> WaitTimeout:
    state = "never read" if last is None else f"still {last.status}"
    return WaitTimeout(f"task {task_id} is not final yet ({state})", last)


class Arbiter:
    """A blocking client of the Arbiter API.

    ``api_key`` defaults to ``SVC_API_KEY``, ``base_url`` to
    ``SVC_BASE_URL`` (else http://localhost:8080). ``timeout`` bounds each
    request (a long-poll gets its wait on top); ``max_retries`` and
    ``max_retry_wait`` bound the retries of 429, 5xx, 409 and lost
    connections (see the README). Use it as a context manager, or call
    ``close()``."""

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

    def close(self) -> None:
        """Closes the HTTP connections the client opened."""
        if self._own_http:
            self._http.close()

    def __enter__(self) -> "Arbiter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, call: Call) -> Any:
        attempt = 0
        while True:
            try:
                resp = self._http.send(call.request(self._http, self._s))
            except httpx.TransportError as e:
                err = _core.connection_error(call, e)
                cause: Optional[BaseException] = e
            else:
                if resp.status_code == 200:
                    return resp.json()
                if resp.status_code == 204 and call.method == "DELETE":
                    return None
                err, cause = _core.answer_error(resp), None
            wait = _core.retry_wait(call, attempt, err, self._s)
            if wait is None:
                raise err from cause
            time.sleep(wait)
            attempt += 1

    def create_task(
        self,
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
        idempotency_key: Optional[str] = None,
    ) -> Task:
        """Creates a task and returns it. With ``idempotency_key`` a repeat
        of the same create returns the task that key made. ``reminders``
        (["15m", "50%"]) and ``escalation`` ([{"after": "30m", "to":
        "role:admin"}]) left as None take the task type's policy's.
        ``gold_verdict`` (one of ``allowed_verdicts``) makes it a gold task:
        people decide it without being told, and their answers measure their
        accuracy. ``notify`` (["slack:#refunds"]) names the Slack channels
        the question goes to. ``reviews_required`` (2 to 5), ``consensus``
        ("unanimous" or "quorum", with ``quorum``), ``veto``,
        ``requested_by``, ``exclude_requester`` and ``tiebreak``
        ("role:admin") ask several people to vote; left as None, the
        task type's policy's requirement applies."""
        body = _core.task_body(
            prompt, allowed_verdicts, context=context, confidence_threshold=confidence_threshold,
            task_type=task_type, touchpoint=touchpoint, source=source,
            deadline_seconds=deadline_seconds, callback_url=callback_url, audit_rate=audit_rate,
            on_expiry=on_expiry, agent_floor=agent_floor, on_expiry_fallback=on_expiry_fallback,
            reminders=reminders, escalation=escalation, gold_verdict=gold_verdict,
            notify=notify, display=display, reviews_required=reviews_required, consensus=consensus,
            quorum=quorum, veto=veto, requested_by=requested_by, exclude_requester=exclude_requester,
            tiebreak=tiebreak,
        )
        key = idempotency_key or _core.new_idempotency_key()
        return Task.from_dict(self._send(Call("POST", "/v1/tasks", body=body, idempotency_key=key, repeatable=True)))

    def create_tasks(self, tasks: Sequence[Mapping[str, Any]]) -> List[TaskResult]:
        """Creates up to 100 tasks in one request. Each item holds
        ``create_task``'s arguments as a mapping (``prompt``,
        ``allowed_verdicts``, …, ``idempotency_key``); the answer has one
        TaskResult per item, in order: the task, or the item's error."""
        body, _ = _core.batch_body(tasks)
        return _core.batch_results(self._send(Call("POST", "/v1/tasks/batch", body=body, repeatable=True)))

    def get_task(self, task_id: str, wait: Optional[int] = None) -> Task:
        """Reads a task. With ``wait`` (0 to 60 seconds) the server answers
        as soon as the task is final, or after that long as it is then."""
        params = None if not wait else {"wait": wait}
        timeout = None if not wait else self._s.timeout + wait
        return Task.from_dict(self._send(Call("GET", _core.task_path(task_id), params=params, timeout=timeout)))

    def wait_task(self, task_id: str, timeout: Optional[float] = None) -> Task:
        """Waits until the task is completed or expired, long-polling, and
        returns it. ``timeout`` (seconds) bounds the wait; past it,
        WaitTimeout carries the task as last read. None waits as long as it
        takes, which for a person may be days."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last: Optional[Task] = None
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise _wait_timeout(task_id, last)
            last = self.get_task(task_id, wait=_core.long_poll_seconds(remaining))
            if last.final:
                return last
            if remaining is not None and remaining < 1:
                raise _wait_timeout(task_id, last)

    def list_tasks(
        self,
        *,
        status: Optional[str] = None,
        task_type: Optional[str] = None,
        source: Optional[str] = None,
        touchpoint: Optional[str] = None,
        final_tier: Optional[str] = None,
        created_after: Optional[float] = None,
        created_before: Optional[float] = None,
        page_size: Optional[int] = None,
    ) -> Iterator[Task]:
        """Yields the account's tasks, newest first, that match the filters,
        reading page after page (``page_size``, 1 to 100) as it goes."""
        params: Dict[str, Any] = _core.list_params(
            status=status, task_type=task_type, source=source, touchpoint=touchpoint,
            final_tier=final_tier, created_after=created_after, created_before=created_before,
            page_size=page_size,
        )
        while True:
            page = self._send(Call("GET", "/v1/tasks", params=params))
            tasks = [Task.from_dict(t) for t in page.get("tasks", [])]
            yield from tasks
            if not page.get("has_more") or not tasks:
                return
            params = {**params, "starting_after": tasks[-1].id}

    def ask(
        self,
        prompt: str,
        allowed_verdicts: Sequence[str],
        context: Any = None,
        *,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
        **fields: Any,
    ) -> Task:
        """Asks and waits for the answer: creates the task (with an
        idempotency key, so a retry never asks twice) and waits up to
        ``wait`` seconds (None: until it is final) for it to be completed
        or expired. Other create fields (``confidence_threshold``,
        ``task_type``, ``deadline_seconds``, …) pass through."""
        task = self.create_task(prompt, allowed_verdicts, context=context, idempotency_key=idempotency_key, **fields)
        if task.final:
            return task
        return self.wait_task(task.id, timeout=wait)

    def list_policies(self) -> List[Dict[str, Any]]:
        """The account's policies, by task type, as the API answers them."""
        return list(self._send(Call("GET", "/v1/policies"))["policies"])

    def get_policy(self, task_type: str) -> Dict[str, Any]:
        """The account's policy of the task type ("default" for the default
        policy); NotFound without one."""
        return dict(self._send(Call("GET", _core.policy_path(task_type))))

    def put_policy(self, task_type: str, **fields: Any) -> Dict[str, Any]:
        """Replaces the account's policy of the task type with ``fields``
        (confidence_threshold, deadline_seconds, audit_rate, on_expiry,
        agent_floor, on_expiry_fallback; notify, a list of Slack channels
        such as ["slack:#refunds"]; the review requirement's reviews_required,
        consensus, quorum, veto, exclude_requester and tiebreak; reminders and
        escalation; left out: not set) and returns it. A create that leaves a
        field out takes the policy's. Tasks already created keep their values."""
        return dict(self._send(Call("PUT", _core.policy_path(task_type), body=fields, repeatable=True)))

    def delete_policy(self, task_type: str) -> None:
        """Deletes the account's policy of the task type; NotFound without one."""
        self._send(Call("DELETE", _core.policy_path(task_type)))


class AsyncArbiter:
    """The asyncio client: Arbiter's methods as coroutines, and
    ``list_tasks`` as an async iterator. Use it as an async context manager,
    or await ``aclose()``."""

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

    async def aclose(self) -> None:
        """Closes the HTTP connections the client opened."""
        if self._own_http:
            await self._http.aclose()

    async def __aenter__(self) -> "AsyncArbiter":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, call: Call) -> Any:
        attempt = 0
        while True:
            try:
                resp = await self._http.send(call.request(self._http, self._s))
            except httpx.TransportError as e:
                err = _core.connection_error(call, e)
                cause: Optional[BaseException] = e
            else:
                if resp.status_code == 200:
                    return resp.json()
                if resp.status_code == 204 and call.method == "DELETE":
                    return None
                err, cause = _core.answer_error(resp), None
            wait = _core.retry_wait(call, attempt, err, self._s)
            if wait is None:
                raise err from cause
            await asyncio.sleep(wait)
            attempt += 1

    async def create_task(
        self,
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
        idempotency_key: Optional[str] = None,
    ) -> Task:
        """See Arbiter.create_task."""
        body = _core.task_body(
            prompt, allowed_verdicts, context=context, confidence_threshold=confidence_threshold,
            task_type=task_type, touchpoint=touchpoint, source=source,
            deadline_seconds=deadline_seconds, callback_url=callback_url, audit_rate=audit_rate,
            on_expiry=on_expiry, agent_floor=agent_floor, on_expiry_fallback=on_expiry_fallback,
            reminders=reminders, escalation=escalation, gold_verdict=gold_verdict,
            notify=notify, display=display, reviews_required=reviews_required, consensus=consensus,
            quorum=quorum, veto=veto, requested_by=requested_by, exclude_requester=exclude_requester,
            tiebreak=tiebreak,
        )
        key = idempotency_key or _core.new_idempotency_key()
        data = await self._send(Call("POST", "/v1/tasks", body=body, idempotency_key=key, repeatable=True))
        return Task.from_dict(data)

    async def create_tasks(self, tasks: Sequence[Mapping[str, Any]]) -> List[TaskResult]:
        """See Arbiter.create_tasks."""
        body, _ = _core.batch_body(tasks)
        return _core.batch_results(await self._send(Call("POST", "/v1/tasks/batch", body=body, repeatable=True)))

    async def get_task(self, task_id: str, wait: Optional[int] = None) -> Task:
        """See Arbiter.get_task."""
        params = None if not wait else {"wait": wait}
        timeout = None if not wait else self._s.timeout + wait
        return Task.from_dict(await self._send(Call("GET", _core.task_path(task_id), params=params, timeout=timeout)))

    async def wait_task(self, task_id: str, timeout: Optional[float] = None) -> Task:
        """See Arbiter.wait_task."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last: Optional[Task] = None
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise _wait_timeout(task_id, last)
            last = await self.get_task(task_id, wait=_core.long_poll_seconds(remaining))
            if last.final:
                return last
            if remaining is not None and remaining < 1:
                raise _wait_timeout(task_id, last)

    async def list_tasks(
        self,
        *,
        status: Optional[str] = None,
        task_type: Optional[str] = None,
        source: Optional[str] = None,
        touchpoint: Optional[str] = None,
        final_tier: Optional[str] = None,
        created_after: Optional[float] = None,
        created_before: Optional[float] = None,
        page_size: Optional[int] = None,
    ) -> AsyncIterator[Task]:
        """See Arbiter.list_tasks; iterate with ``async for``."""
        params: Dict[str, Any] = _core.list_params(
            status=status, task_type=task_type, source=source, touchpoint=touchpoint,
            final_tier=final_tier, created_after=created_after, created_before=created_before,
            page_size=page_size,
        )
        while True:
            page = await self._send(Call("GET", "/v1/tasks", params=params))
            tasks = [Task.from_dict(t) for t in page.get("tasks", [])]
            for t in tasks:
                yield t
            if not page.get("has_more") or not tasks:
                return
            params = {**params, "starting_after": tasks[-1].id}

    async def ask(
        self,
        prompt: str,
        allowed_verdicts: Sequence[str],
        context: Any = None,
        *,
        wait: Optional[float] = None,
        idempotency_key: Optional[str] = None,
        **fields: Any,
    ) -> Task:
        """See Arbiter.ask."""
        task = await self.create_task(prompt, allowed_verdicts, context=context, idempotency_key=idempotency_key, **fields)
        if task.final:
            return task
        return await self.wait_task(task.id, timeout=wait)

    async def list_policies(self) -> List[Dict[str, Any]]:
        """See Arbiter.list_policies."""
        return list((await self._send(Call("GET", "/v1/policies")))["policies"])

    async def get_policy(self, task_type: str) -> Dict[str, Any]:
        """See Arbiter.get_policy."""
        return dict(await self._send(Call("GET", _core.policy_path(task_type))))

    async def put_policy(self, task_type: str, **fields: Any) -> Dict[str, Any]:
        """See Arbiter.put_policy."""
        return dict(await self._send(Call("PUT", _core.policy_path(task_type), body=fields, repeatable=True)))

    async def delete_policy(self, task_type: str) -> None:
        """See Arbiter.delete_policy."""
        await self._send(Call("DELETE", _core.policy_path(task_type)))


__all__ = ["Arbiter", "AsyncArbiter", "ArbiterError"]
