"""LangGraph: a node asks Arbiter through ``interrupt()``, and the run
resumes with ``Command(resume=...)`` once Arbiter has an answer, once.

In a node::

    from arbiterhq.langgraph import ask_arbiter

    def refund(state):
        args = {"order": "ord_1", "amount": 42.5}
        decision = ask_arbiter("Refund order ord_1?", ["approve", "reject"],
                               action={"name": "issue_refund", "args": args, "editable": ["amount"]})
        if decision.type() != "reject":            # "approve", or "edit" by a reviewer
            issue_refund(**decision.approved_args("issue_refund", args))
        return {"outcome": decision.verdict}

Around the graph (compiled with a checkpointer)::

    bridge = LangGraphBridge(Arbiter(), store)
    graph.invoke(inputs, config)          # stops at the interrupt
    bridge.submit(graph, config)          # one Arbiter task per interrupt
    ...                                   # later, in a webhook handler:
    bridge.resume(graph, Task.from_dict(event["data"]))

A task's idempotency key is ``langgraph:{thread_id}:{interrupt_id}``, so a
process that restarts and submits the same paused thread again re-attaches
to the task it made; ``resume`` resumes a thread once per task however
often the decision arrives (``ResumeStore.claim``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from langgraph.types import Command, interrupt

from ._client import Arbiter
from ._core import DEFAULT_WAIT
from ._models import Task
from ._resume import Decision, MemoryResumeStore, ResumeStore, SQLResumeStore

__all__ = ["LangGraphBridge", "ask_arbiter", "Decision", "MemoryResumeStore", "ResumeStore", "SQLResumeStore"]

# The key of an interrupt's value that holds an Arbiter question.
QUESTION = "arbiter"


def ask_arbiter(prompt: str, allowed_verdicts: Sequence[str], context: Any = None, **fields: Any) -> Decision:
    """Pauses the graph with an Arbiter question and returns the decision
    when the run is resumed. ``fields`` are the create's other fields
    (``confidence_threshold``, ``task_type``, ``deadline_seconds``, …),
    ``action`` among them: the tool call asked about, ``{"name", "args",
    "editable", "schema"}``, whose approved form (a reviewer may edit it:
    the decision's type is then ``"edit"``) ``decision.approved_args(name,
    args)`` returns, checked against both digests. As with any
    ``interrupt()``, the node runs again from its start on resume, so work
    before this call must be safe to repeat."""
    question: Dict[str, Any] = {"prompt": prompt, "allowed_verdicts": list(allowed_verdicts), "context": context, **fields}
    answer = interrupt({QUESTION: question})
    return Decision.from_dict(answer)


def _thread_id(config: Mapping[str, Any]) -> str:
    tid = config.get("configurable", {}).get("thread_id")
    if not tid:
        raise ValueError("config needs configurable.thread_id (a graph with a checkpointer)")
    return str(tid)


class LangGraphBridge:
    """Turns a graph's Arbiter interrupts into tasks and Arbiter's
    decisions into resumes. ``store`` keeps which thread a task pauses and
    whether it was resumed (MemoryResumeStore for tests)."""

    def __init__(self, arbiter: Arbiter, store: ResumeStore) -> None:
        self.arbiter = arbiter
        self.store = store

    def submit(self, graph: Any, config: Mapping[str, Any]) -> List[Task]:
        """Asks Arbiter once for each Arbiter interrupt the thread is paused
        on and returns the tasks (made now, or earlier by any process)."""
        thread_id = _thread_id(config)
        tasks: List[Task] = []
        for intr in graph.get_state(config).interrupts:
            value = intr.value
            if not isinstance(value, dict) or not isinstance(value.get(QUESTION), dict):
                continue
            task = self.arbiter.tasks.create(idempotency_key=f"langgraph:{thread_id}:{intr.id}", **value[QUESTION])
            self.store.remember(task.id, {"thread_id": thread_id, "interrupt_id": intr.id})
            tasks.append(task)
        return tasks

    def resume(self, graph: Any, task: Task) -> Optional[Any]:
        """Resumes the thread the decided task pauses, with its decision,
        and returns what the graph returns. None when the task is not final,
        not one of this bridge's, or its thread was already resumed (the
        decision arrived twice)."""
        if not task.final:
            return None
        ref = self.store.recall(task.id)
        if ref is None or not self.store.claim(task.id):
            return None
        config = {"configurable": {"thread_id": ref["thread_id"]}}
        command: Command[Any] = Command(resume={ref["interrupt_id"]: Decision.from_task(task).as_dict()})
        return graph.invoke(command, config)

    def run(
        self, graph: Any, inputs: Any, config: Mapping[str, Any], *, timeout: Optional[float] = DEFAULT_WAIT
    ) -> Any:
        """Runs the graph to its end in this process: at each pause, asks
        Arbiter and waits (up to ``timeout`` seconds per question, 10
        minutes unless given; None: without bound) for the answers. For runs that must survive a restart, use submit and
        resume from a webhook instead."""
        result = graph.invoke(inputs, config)
        while True:
            tasks = self.submit(graph, config)
            if not tasks:
                return result
            for task in tasks:
                done = self.arbiter.tasks.wait(task.id, timeout=timeout)
                resumed = self.resume(graph, done)
                if resumed is not None:
                    result = resumed
