"""arbiterhq.langgraph against LangGraph's real package and a real server."""

from __future__ import annotations

import secrets
import threading
from typing import Any, Dict, List, Optional, TypedDict

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402

import arbiterhq  # noqa: E402
from arbiterhq import Arbiter, Task  # noqa: E402
from arbiterhq.langgraph import LangGraphBridge, MemoryResumeStore, ask_arbiter  # noqa: E402

from conftest import Account  # noqa: E402
from harness import Receiver, Reviewer, wait_for  # noqa: E402


class State(TypedDict, total=False):
    order: str
    auto: str
    callback_url: str
    outcome: str
    rationale: str


class Shop:
    """A graph whose one node asks Arbiter before it refunds, and a record
    of the refunds it made."""

    def __init__(self) -> None:
        self.refunds: List[str] = []
        self._lock = threading.Lock()
        builder = StateGraph(State)
        builder.add_node("refund", self.refund)
        builder.add_edge(START, "refund")
        builder.add_edge("refund", END)
        self.checkpointer = InMemorySaver()
        self.graph = builder.compile(checkpointer=self.checkpointer)

    def refund(self, state: State) -> Dict[str, Any]:
        fields: Dict[str, Any] = {}
        if state.get("callback_url"):
            fields["callback_url"] = state["callback_url"]
        context = {"order": state["order"], "auto": state.get("auto", "")}
        d = ask_arbiter(f"Refund {state['order']}?", ["approve", "reject"], context, **fields)
        if d.verdict == "approve":
            with self._lock:
                self.refunds.append(state["order"])
        return {"outcome": d.verdict or d.status, "rationale": d.rationale}


def _config() -> Any:
    return {"configurable": {"thread_id": "thread-" + secrets.token_hex(4)}}


def _pause(shop: Shop, config: Any, **state: str) -> None:
    result = shop.graph.invoke({"order": "ord_" + secrets.token_hex(3), **state}, config)
    assert result.get("__interrupt__"), "the graph did not pause"


def test_a_person_approves_and_the_run_resumes_once_after_a_restart(account: Account, reviewer: Reviewer) -> None:
    shop, store, config = Shop(), MemoryResumeStore(), _config()
    _pause(shop, config)
    first = LangGraphBridge(account.client(), store)
    (task,) = first.submit(shop.graph, config)

    # A restarted process: a new client and bridge over the same store and
    # checkpoints re-attaches to the same task instead of asking again.
    second = LangGraphBridge(account.client(), store)
    (again,) = second.submit(shop.graph, config)
    assert again.id == task.id

    wait_for(lambda: first.arbiter.tasks.get(task.id).status == arbiterhq.HUMAN_NEEDED, "the task to reach a person")
    reviewer.decide(task.id, "approve", "Receipt checked.")
    decided = second.arbiter.tasks.wait(task.id, timeout=60)
    result = second.resume(shop.graph, decided)
    assert result is not None
    assert (result["outcome"], result["rationale"]) == ("approve", "Receipt checked.")
    assert len(shop.refunds) == 1

    # The decision delivered again (a retried webhook, a second worker).
    assert first.resume(shop.graph, decided) is None
    assert second.resume(shop.graph, decided) is None
    assert len(shop.refunds) == 1
    assert not shop.graph.get_state(config).interrupts


def test_a_person_rejects_and_the_node_sees_the_reason(account: Account, reviewer: Reviewer) -> None:
    shop, config = Shop(), _config()
    bridge = LangGraphBridge(account.client(), MemoryResumeStore())
    _pause(shop, config)
    (task,) = bridge.submit(shop.graph, config)
    wait_for(lambda: bridge.arbiter.tasks.get(task.id).status == arbiterhq.HUMAN_NEEDED, "the task to reach a person")
    reviewer.decide(task.id, "reject", "Refunded last week already.")
    result = bridge.resume(shop.graph, bridge.arbiter.tasks.wait(task.id, timeout=60))
    assert result is not None
    assert (result["outcome"], result["rationale"]) == ("reject", "Refunded last week already.")
    assert shop.refunds == []


def test_the_agent_tier_answers_without_a_person(account: Account) -> None:
    shop, config = Shop(), _config()
    bridge = LangGraphBridge(account.client(), MemoryResumeStore())
    result = bridge.run(shop.graph, {"order": "ord_auto", "auto": "approve"}, config, timeout=60)
    assert result["outcome"] == "approve"
    assert shop.refunds == ["ord_auto"]


def test_a_webhook_and_a_wait_racing_resume_once(account: Account, reviewer: Reviewer) -> None:
    receiver = Receiver()
    try:
        shop, config = Shop(), _config()
        store = MemoryResumeStore()
        _pause(shop, config, callback_url=receiver.url)
        waiter, hook = LangGraphBridge(account.client(), store), LangGraphBridge(account.client(), store)
        (task,) = waiter.submit(shop.graph, config)
        wait_for(lambda: waiter.arbiter.tasks.get(task.id).status == arbiterhq.HUMAN_NEEDED, "the task to reach a person")

        results: List[Optional[Any]] = []
        lock = threading.Lock()

        def by_wait() -> None:
            r = waiter.resume(shop.graph, waiter.arbiter.tasks.wait(task.id, timeout=60))
            with lock:
                results.append(r)

        def by_webhook() -> None:
            _, body = wait_for(lambda: receiver.for_task(task.id, "task.completed"), "the callback")
            import json

            r = hook.resume(shop.graph, Task.from_dict(json.loads(body)["data"]))
            with lock:
                results.append(r)

        threads = [threading.Thread(target=by_wait), threading.Thread(target=by_webhook)]
        for t in threads:
            t.start()
        reviewer.decide(task.id, "approve")
        for t in threads:
            t.join(60)
        assert len(results) == 2
        assert sum(r is not None for r in results) == 1
        assert len(shop.refunds) == 1
    finally:
        receiver.close()
