"""arbiterhq.openai_agents against the OpenAI Agents SDK's real package
(with its own ScriptedModel, so no LLM is called) and a real server."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any, List, Tuple

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner, RunState, function_tool, set_tracing_disabled  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

import arbiterhq  # noqa: E402
from arbiterhq import AsyncArbiter  # noqa: E402
from arbiterhq.openai_agents import ArbiterApprovals, MemoryResumeStore  # noqa: E402

from conftest import Account  # noqa: E402
from harness import Reviewer, wait_for  # noqa: E402

set_tracing_disabled(True)


def _support_agent(approvals: ArbiterApprovals, amount: float) -> Tuple[Agent[Any], ScriptedModel, List[str]]:
    refunds: List[str] = []

    @function_tool(needs_approval=approvals.needs_approval("issue_refund"))
    def issue_refund(order: str, amount: float) -> str:
        """Refunds an order."""
        refunds.append(order)
        return f"refunded {order}"

    model = ScriptedModel([
        [function_call("issue_refund", {"order": "ord_1", "amount": amount}, call_id="call_" + secrets.token_hex(4))],
        [assistant_message("All done.")],
    ])
    return Agent(name="support", model=model, tools=[issue_refund]), model, refunds


def _client(account: Account) -> AsyncArbiter:
    return AsyncArbiter(account.key, base_url=account.server.base_url)


def _human_needed(account: Account, task_id: str) -> bool:
    with account.client() as a:
        return a.tasks.get(task_id).status == arbiterhq.HUMAN_NEEDED


def test_a_person_rejects_the_tool_does_not_run_and_the_model_sees_why(account: Account, reviewer: Reviewer) -> None:
    store, run_id = MemoryResumeStore(), "run-" + secrets.token_hex(4)

    async def pause() -> Tuple[Agent[Any], ScriptedModel, List[str], str, str]:
        approvals = ArbiterApprovals(_client(account), store, agent_wait=1)
        agent, model, refunds = _support_agent(approvals, 420.0)
        result = await Runner.run(agent, "Refund ord_1", context={"run_id": run_id})
        assert len(result.interruptions) == 1
        (task,) = await approvals.submit(result, run_id)
        return agent, model, refunds, task.id, result.to_state().to_string()

    agent, model, refunds, task_id, saved = asyncio.run(pause())
    wait_for(lambda: _human_needed(account, task_id), "the task to reach a person")
    reviewer.decide(task_id, "reject", "Over the refund limit.")

    async def resume() -> Tuple[Any, Any]:
        # A restarted process: a new client and approvals over the same store.
        approvals = ArbiterApprovals(_client(account), store)
        state = await RunState.from_string(agent, saved)
        (again,) = await approvals.submit(state, run_id)
        assert again.id == task_id
        decided = await approvals.arbiter.tasks.wait(task_id, timeout=60)
        first = await approvals.resume(agent, saved, decided)
        second = await approvals.resume(agent, saved, decided)
        return first, second

    first, second = asyncio.run(resume())
    assert first is not None and first.final_output == "All done."
    assert second is None, "the decision delivered twice resumed the run twice"
    assert refunds == []
    seen = str(model.last_call.input if model.last_call else "")
    assert "Over the refund limit." in seen


def test_a_person_approves_and_the_tool_runs_once(account: Account, reviewer: Reviewer) -> None:
    store, run_id = MemoryResumeStore(), "run-" + secrets.token_hex(4)
    approvals = ArbiterApprovals(_client(account), store, agent_wait=0)
    agent, _, refunds = _support_agent(approvals, 420.0)

    async def pause() -> Tuple[str, str]:
        result = await Runner.run(agent, "Refund ord_1", context={"run_id": run_id})
        (task,) = await approvals.submit(result, run_id)
        return task.id, result.to_state().to_string()

    task_id, saved = asyncio.run(pause())
    wait_for(lambda: _human_needed(account, task_id), "the task to reach a person")
    reviewer.decide(task_id, "approve", "Fine.")

    async def resume() -> List[Any]:
        async with _client(account) as a:
            decided = await a.tasks.wait(task_id, timeout=60)
        # Two workers handed the same decision at once.
        one, two = ArbiterApprovals(_client(account), store), ArbiterApprovals(_client(account), store)
        return list(await asyncio.gather(one.resume(agent, saved, decided), two.resume(agent, saved, decided)))

    results = asyncio.run(resume())
    assert sum(r is not None for r in results) == 1
    assert refunds == ["ord_1"]
    done = next(r for r in results if r is not None)
    assert done.final_output == "All done."


def test_the_agent_tier_lets_a_small_refund_run_without_a_pause(account: Account) -> None:
    run_id = "run-" + secrets.token_hex(4)
    approvals = ArbiterApprovals(_client(account), MemoryResumeStore(), agent_wait=30)
    agent, _, refunds = _support_agent(approvals, 5.0)
    result = asyncio.run(Runner.run(agent, "Refund ord_1", context={"run_id": run_id}))
    assert not result.interruptions
    assert result.final_output == "All done."
    assert refunds == ["ord_1"]
