"""The adapters run only what was approved, against the frameworks' real
packages and a real server: a person edits the amount on the desk and the
tool runs with the edited amount; arguments changed after the approval
are refused with ActionDigestMismatch, and the tool does not run."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import secrets
import threading
from typing import Any, Dict, List, Tuple, TypedDict

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("agents")

from agents import Agent, Runner, RunState, function_tool, set_tracing_disabled  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402

import arbiterhq  # noqa: E402
from arbiterhq import ActionDigestMismatch, AsyncArbiter, Task, approved_action, verify_receipt  # noqa: E402
from arbiterhq.langgraph import LangGraphBridge, MemoryResumeStore, ask_arbiter  # noqa: E402
from arbiterhq.openai_agents import ArbiterApprovals  # noqa: E402

from conftest import Account  # noqa: E402
from harness import Reviewer, wait_for  # noqa: E402

set_tracing_disabled(True)

SCHEMA = {"type": "object", "properties": {"order": {"type": "string"}, "amount": {"type": "number", "minimum": 0, "maximum": 1000}}}


class State(TypedDict, total=False):
    order: str
    outcome: str


class Shop:
    """A graph whose node asks Arbiter about the refund call itself, and
    makes the call the decision approved."""

    def __init__(self) -> None:
        self.refunds: List[Tuple[str, float]] = []
        self._lock = threading.Lock()
        builder = StateGraph(State)
        builder.add_node("refund", self.refund)
        builder.add_edge(START, "refund")
        builder.add_edge("refund", END)
        self.graph = builder.compile(checkpointer=InMemorySaver())

    def issue_refund(self, order: str, amount: float) -> None:
        with self._lock:
            self.refunds.append((order, amount))

    def refund(self, state: State) -> Dict[str, Any]:
        args = {"order": state["order"], "amount": 420}
        d = ask_arbiter(f"Refund {state['order']}?", ["approve", "reject"],
                        action={"name": "issue_refund", "args": args, "schema": SCHEMA, "editable": ["amount"]})
        if d.type() == "reject":
            return {"outcome": "rejected"}
        self.issue_refund(**d.approved_args("issue_refund", args))
        return {"outcome": d.type()}


def _waiting(account: Account, task_id: str) -> None:
    with account.client() as a:
        wait_for(lambda: a.tasks.get(task_id).status == arbiterhq.HUMAN_NEEDED, "the task to reach a person")


def test_langgraph_runs_the_amount_a_person_edited(account: Account, reviewer: Reviewer) -> None:
    shop, store = Shop(), MemoryResumeStore()
    config = {"configurable": {"thread_id": "thread-" + secrets.token_hex(4)}}
    order = "ord_" + secrets.token_hex(3)
    assert shop.graph.invoke({"order": order}, config).get("__interrupt__")
    bridge = LangGraphBridge(account.client(), store)
    (task,) = bridge.submit(shop.graph, config)
    assert task.action is not None and task.action.editable == ["amount"]
    _waiting(account, task.id)
    reviewer.decide(task.id, "approve", "Half, as agreed.", edits={"amount": "210"})
    decided = bridge.arbiter.tasks.wait(task.id, timeout=60)
    a = approved_action(decided, "approve")
    assert a.edited and a.args == {"order": order, "amount": 210}
    result = bridge.resume(shop.graph, decided)
    assert result is not None and result["outcome"] == "edit"
    assert shop.refunds == [(order, 210)]
    # The receipt verifies offline with the server's keys, and names the edit.
    with account.client() as c:
        claims = verify_receipt(decided.receipt or "", c.receipts.keys())
        assert c.receipts.verify(decided.receipt or "") == claims
    assert claims.task_id == task.id and claims.action_digest == a.digest and claims.verdict == "approve"


def test_langgraph_refuses_arguments_changed_after_the_approval(account: Account, reviewer: Reviewer) -> None:
    shop, store = Shop(), MemoryResumeStore()
    config = {"configurable": {"thread_id": "thread-" + secrets.token_hex(4)}}
    assert shop.graph.invoke({"order": "ord_" + secrets.token_hex(3)}, config).get("__interrupt__")
    bridge = LangGraphBridge(account.client(), store)
    (task,) = bridge.submit(shop.graph, config)
    _waiting(account, task.id)
    reviewer.decide(task.id, "approve", "Fine.")
    decided = bridge.arbiter.tasks.wait(task.id, timeout=60)
    # The decision reaches the bridge with its amount changed (a payload
    # rewritten on its way): the digest no longer matches.
    assert decided.approved_action is not None
    tampered = dataclasses.replace(decided, approved_action=dataclasses.replace(
        decided.approved_action, args={**decided.approved_action.args, "amount": 4200}))
    with pytest.raises(ActionDigestMismatch):
        bridge.resume(shop.graph, tampered)
    assert shop.refunds == []


def _agent(approvals: ArbiterApprovals, refunds: List[Tuple[str, float]], resumed: bool = False) -> Agent[Any]:
    """The support agent; resumed, its model is past the call and ends."""
    @function_tool(needs_approval=approvals.needs_approval("issue_refund"))
    def issue_refund(order: str, amount: float) -> str:
        """Refunds an order."""
        refunds.append((order, amount))
        return f"refunded {amount} on {order}"

    turns = [[function_call("issue_refund", {"order": "ord_1", "amount": 420.0}, call_id="call_" + secrets.token_hex(4))],
             [assistant_message("All done.")]]
    model = ScriptedModel(turns[1:] if resumed else turns)
    return Agent(name="support", model=model, tools=[approvals.guard(issue_refund)])


def _approvals(account: Account, store: MemoryResumeStore, **options: Any) -> ArbiterApprovals:
    # A client per event loop: each asyncio.run below is a process of its
    # own (the pause, then the resume after a restart).
    return ArbiterApprovals(AsyncArbiter(account.key, base_url=account.server.base_url), store, agent_wait=0,
                            editable={"issue_refund": ["amount"]}, **options)


def _pause(account: Account, store: MemoryResumeStore, refunds: List[Tuple[str, float]], run_id: str,
           **options: Any) -> Tuple[Task, str]:
    async def go() -> Tuple[Task, str]:
        approvals = _approvals(account, store, **options)
        result = await Runner.run(_agent(approvals, refunds), "Refund ord_1", context={"run_id": run_id})
        assert len(result.interruptions) == 1
        (task,) = await approvals.submit(result, run_id)
        return task, result.to_state().to_string()

    return asyncio.run(go())


def _resume(account: Account, store: MemoryResumeStore, refunds: List[Tuple[str, float]], task_id: str,
            saved: str, **options: Any) -> Any:
    async def go() -> Any:
        approvals = _approvals(account, store, **options)
        decided = await approvals.arbiter.tasks.wait(task_id, timeout=60)
        return await approvals.resume(_agent(approvals, refunds, resumed=True), saved, decided)

    return asyncio.run(go())


def test_openai_agents_run_the_amount_a_person_edited(account: Account, reviewer: Reviewer) -> None:
    store, run_id, refunds = MemoryResumeStore(), "run-" + secrets.token_hex(4), []
    task, saved = _pause(account, store, refunds, run_id, schemas={"issue_refund": SCHEMA})
    _waiting(account, task.id)
    reviewer.decide(task.id, "approve", "Half.", edits={"amount": "210"})
    result = _resume(account, store, refunds, task.id, saved, schemas={"issue_refund": SCHEMA})
    assert result is not None and result.final_output == "All done."
    assert refunds == [("ord_1", 210)]


def _tamper(saved: str, arguments: str, changed: str) -> str:
    """The saved run with every copy of the call's arguments changed and
    its tool invocation records gone."""
    found = 0

    def walk(v: Any) -> Any:
        nonlocal found
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                if k == "arguments" and x == arguments:
                    found += 1
                    out[k] = changed
                elif k == "tool_invocations":
                    out[k] = {}
                else:
                    out[k] = walk(x)
            return out
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    tampered = json.dumps(walk(json.loads(saved)))
    assert found > 0, "the saved state does not hold the call's arguments as expected"
    return tampered


def test_openai_agents_refuse_arguments_changed_after_the_approval(account: Account, reviewer: Reviewer) -> None:
    store, run_id, refunds = MemoryResumeStore(), "run-" + secrets.token_hex(4), []
    task, saved = _pause(account, store, refunds, run_id)
    _waiting(account, task.id)
    reviewer.decide(task.id, "approve", "Fine.")
    # The saved run is changed after the approval: the pending call now
    # refunds ten times as much, and the Agents SDK's own record of the
    # call is dropped, so that only the guard stands between the change
    # and the tool.
    tampered = _tamper(saved, '{"order":"ord_1","amount":420.0}', '{"order":"ord_1","amount":4200.0}')
    with pytest.raises(Exception) as refused:
        _resume(account, store, refunds, task.id, tampered)
    chain, e = [], refused.value  # the SDK may wrap the tool's error
    while e is not None:
        chain.append(e)
        e = e.__cause__ or e.__context__
    assert any(isinstance(x, ActionDigestMismatch) for x in chain), f"refused with {refused.value!r}"
    assert refunds == []
