"""The asyncio client against a real server: the same surface as Arbiter."""

from __future__ import annotations

import asyncio
import secrets
from typing import List

import pytest

import arbiterhq
from arbiterhq import AsyncArbiter, Task

from conftest import Account
from harness import Proxy, Reviewer, Server, wait_for


def _client(account: Account, base_url: str = "") -> AsyncArbiter:
    return AsyncArbiter(account.key, base_url=base_url or account.server.base_url)


def test_async_ask_and_list(account: Account) -> None:
    src = "sdk-async-" + secrets.token_hex(4)

    async def main() -> "tuple[Task, List[Task], List[arbiterhq.TaskResult]]":
        async with _client(account) as a:
            task = await a.ask("Approve?", ["approve", "reject"], {"auto": "approve"}, wait=30, source=src)
            made = await a.tasks.create_batch([{"prompt": f"Async {i}?", "allowed_verdicts": ["yes"], "source": src} for i in range(4)])
            listed = [t async for t in a.tasks.list(source=src, limit=2)]
            return task, listed, made

    task, listed, made = asyncio.run(main())
    assert (task.final_verdict, task.final_tier) == ("approve", arbiterhq.TIER_AGENT)
    assert {t.id for t in listed} == {task.id} | {r.task.id for r in made if r.task is not None}
    assert len(listed) == 5


def test_async_wait_returns_when_a_person_decides(account: Account, reviewer: Reviewer) -> None:
    async def main() -> Task:
        async with _client(account) as a:
            task = await a.tasks.create(prompt="Async person?", allowed_verdicts=["ship", "hold"])

            async def reached() -> None:
                while (await a.tasks.get(task.id)).status != arbiterhq.HUMAN_NEEDED:
                    await asyncio.sleep(0.05)

            await asyncio.wait_for(reached(), 30)
            waiting = asyncio.ensure_future(a.tasks.wait(task.id, timeout=60))
            await asyncio.get_running_loop().run_in_executor(None, reviewer.decide, task.id, "ship", "Fine.")
            return await waiting

    done = asyncio.run(main())
    assert (done.status, done.final_verdict, done.final_tier) == (arbiterhq.COMPLETED, "ship", arbiterhq.TIER_HUMAN)


def test_async_errors_and_retries(server: Server, account: Account) -> None:
    proxy = Proxy(server.base_url, [(429, {"Retry-After": "1"})])

    async def main() -> None:
        async with _client(account, proxy.url) as a:
            task = await a.tasks.create(prompt="Async retried?", allowed_verdicts=["yes"])
            assert task.id.startswith("tsk_")
            with pytest.raises(arbiterhq.NotFoundError):
                await a.tasks.get("tsk_0000000000000000")
            with pytest.raises(arbiterhq.IdempotencyMismatchError):
                key = "async-" + secrets.token_hex(4)
                await a.tasks.create(prompt="A?", allowed_verdicts=["yes"], idempotency_key=key)
                await a.tasks.create(prompt="B?", allowed_verdicts=["yes"], idempotency_key=key)

    try:
        asyncio.run(main())
        (t0, _, k0), (t1, _, k1) = proxy.seen[:2]
        assert t1 - t0 >= 1.0 and k0 is not None and k0 == k1
    finally:
        proxy.close()


def test_async_policies(account: Account) -> None:
    task_type = "async-" + secrets.token_hex(4)

    async def main() -> "tuple[arbiterhq.Policy, List[arbiterhq.Policy], Task]":
        async with _client(account) as a:
            put = await a.policies.update(task_type, deadline_seconds=120, on_expiry="verdict:no")
            listed = await a.policies.list()
            task = await a.tasks.create(prompt="Ok?", allowed_verdicts=["yes", "no"], task_type=task_type)
            await a.policies.delete(task_type)
            return put, listed, task

    put, listed, task = asyncio.run(main())
    assert put.on_expiry == "verdict:no"
    assert any(p.task_type == task_type for p in listed)
    assert task.deadline_at == pytest.approx(task.created_at + 120, abs=0.01)
