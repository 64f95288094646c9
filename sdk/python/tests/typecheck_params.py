"""Checked by mypy --strict in make test-python, never run: the blocking
and asyncio clients take one TaskCreateParams shape, and mypy refuses a
field the document does not have or a value of the wrong type (each
``type: ignore`` below must be needed: mypy --strict reports one that is
not)."""

from __future__ import annotations

from arbiterhq import Arbiter, AsyncArbiter, Policy, Task, TaskCreateParams


def blocking(a: Arbiter, params: TaskCreateParams) -> Task:
    a.tasks.create(**params)
    a.tasks.create(prompt="p", allowed_verdicts=["a"], deadline_seconds=60, idempotency_key="k")
    a.tasks.create(prompt="p", allowed_verdicts=["a"], deadline=60)  # type: ignore[call-arg]
    a.tasks.create(prompt="p", allowed_verdicts=["a"], deadline_seconds="60")  # type: ignore[arg-type]
    a.tasks.create(allowed_verdicts=["a"])  # type: ignore[call-arg]
    a.ask("p", ["a"], {"x": 1}, task_type="refund", wait=None)
    a.ask("p", ["a"], None, taks_type="refund")  # type: ignore[call-arg]
    policy: Policy = a.policies.update("refund", deadline_seconds=600, escalation=[{"after": "1h", "to": "role:admin"}])
    a.policies.update("refund", deadline=600)  # type: ignore[call-arg]
    assert policy.task_type
    return a.with_options(timeout=5, max_retries=0).tasks.get("tsk_0000000000000000", wait=5)


async def asyncio_(a: AsyncArbiter, params: TaskCreateParams) -> Task:
    await a.tasks.create(**params)
    await a.tasks.create(prompt="p", allowed_verdicts=["a"], deadline_seconds=60, idempotency_key="k")
    await a.tasks.create(prompt="p", allowed_verdicts=["a"], deadline=60)  # type: ignore[call-arg]
    await a.tasks.create(prompt="p", allowed_verdicts=["a"], deadline_seconds="60")  # type: ignore[arg-type]
    await a.ask("p", ["a"], None, taks_type="refund")  # type: ignore[call-arg]
    page = await a.tasks.list(status="completed", limit=5)
    async for t in a.tasks.list(source="x"):
        assert t.id
    assert page.starting_after is None or page.has_more
    return await a.with_options(timeout=5).tasks.get("tsk_0000000000000000")
