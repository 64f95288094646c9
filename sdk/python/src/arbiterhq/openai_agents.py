"""The OpenAI Agents SDK: a tool's ``needs_approval`` asks Arbiter, and a
paused run is resumed with Arbiter's decision, once.

::

    approvals = ArbiterApprovals(AsyncArbiter(), store)

    @function_tool(needs_approval=approvals.needs_approval("issue_refund"))
    def issue_refund(order: str, amount: float) -> str: ...

    result = await Runner.run(agent, "Refund ord_1", context={"run_id": run_id})
    if result.interruptions:
        await approvals.submit(result, run_id)   # one Arbiter task per item
        save(run_id, result.to_state().to_string())
    ...                                          # later, in a webhook handler:
    result = await approvals.resume(agent, load(run_id), Task.from_dict(event["data"]))

The policy asks Arbiter when the model calls the tool: a verdict of the
agent tier that allows the call lets it run at once; anything else (the
tier refused, or a person must decide) pauses the run. Each task carries
the call as its ``action`` (``editable`` names, per tool, the arguments a
reviewer may change; ``schemas`` their JSON Schema): wrap the tool with
``approvals.guard(tool)`` and it runs with the approved arguments, a
reviewer's edits included, and refuses (ActionDigestMismatch, nothing run)
a call whose arguments are not the ones approved. A task's idempotency
key is ``openai-agents:{run_id}:{call_id}``, so the policy, ``submit`` and a
restarted process all reach the same task. ``resume`` approves the item (or
rejects it with the decider's rationale as the message the model sees) and
continues the run once per task, however often the decision arrives.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Union

from agents import Agent, FunctionTool, RunContextWrapper, Runner, RunResult, RunState
from agents.tool_context import ToolContext

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._models import TaskCreateOptions

from ._client import AsyncArbiter
from ._base import COMPLETED
from ._errors import IdempotencyMismatchError
from ._integrity import ActionDigestMismatch, check_call
from ._models import Task
from ._resume import Decision, MemoryResumeStore, ResumeStore, SQLResumeStore

__all__ = ["ArbiterApprovals", "Decision", "MemoryResumeStore", "ResumeStore", "SQLResumeStore"]

ApprovalPolicy = Callable[[RunContextWrapper[Any], Dict[str, Any], str], Awaitable[bool]]


def run_id_from_context(ctx: RunContextWrapper[Any]) -> str:
    """The run id in the context given to Runner.run: a ``run_id`` key of a
    mapping, or a ``run_id`` attribute."""
    c = ctx.context
    rid = c.get("run_id") if isinstance(c, Mapping) else getattr(c, "run_id", None)
    if not rid:
        raise ValueError("the run's context needs a run_id (Runner.run(..., context={'run_id': ...}))")
    return str(rid)


def default_prompt(tool_name: str, arguments: Mapping[str, Any]) -> str:
    """The question asked for a tool call."""
    return f"May the agent call {tool_name}?"


class ArbiterApprovals:
    """Asks Arbiter whether tool calls may run. ``verdicts`` are the task's
    allowed verdicts, of which ``allow`` lets the call run; ``agent_wait``
    is how long (whole seconds) the policy waits for the agent tier before
    it pauses the run; ``fields`` pass to every create (``task_type``,
    ``deadline_seconds``, ``callback_url``, …)."""

    def __init__(
        self,
        arbiter: AsyncArbiter,
        store: ResumeStore,
        *,
        verdicts: Sequence[str] = ("approve", "reject"),
        allow: str = "approve",
        agent_wait: int = 5,
        run_id: Callable[[RunContextWrapper[Any]], str] = run_id_from_context,
        prompt: Callable[[str, Mapping[str, Any]], str] = default_prompt,
        editable: Optional[Mapping[str, Sequence[str]]] = None,
        schemas: Optional[Mapping[str, Mapping[str, Any]]] = None,
        **fields: "Unpack[TaskCreateOptions]",
    ) -> None:
        if allow not in verdicts:
            raise ValueError("allow must be one of verdicts")
        self.arbiter = arbiter
        self.store = store
        self.verdicts = list(verdicts)
        self.allow = allow
        self.agent_wait = agent_wait
        self.run_id = run_id
        self.prompt = prompt
        self.editable = dict(editable or {})
        self.schemas = dict(schemas or {})
        self.fields: TaskCreateOptions = fields

    async def _ask(self, run_id: str, call_id: str, tool_name: str, arguments: Mapping[str, Any]) -> Task:
        action: Dict[str, Any] = {"name": tool_name, "args": dict(arguments)}
        if self.editable.get(tool_name):
            action["editable"] = list(self.editable[tool_name])
        if tool_name in self.schemas:
            action["schema"] = dict(self.schemas[tool_name])
        params: Dict[str, Any] = {**self.fields, "action": action}
        try:
            task = await self.arbiter.tasks.create(
                prompt=self.prompt(tool_name, arguments), allowed_verdicts=self.verdicts,
                context={"tool": tool_name, "arguments": dict(arguments)},
                idempotency_key=f"openai-agents:{run_id}:{call_id}", **params,
            )
        except IdempotencyMismatchError as e:
            # The key names one call: the same key with other arguments is
            # the call changed since it was asked about.
            raise ActionDigestMismatch(
                f"the call of {tool_name} is not the one Arbiter was asked about: its arguments changed") from e
        self.store.remember(task.id, {"run_id": run_id, "call_id": call_id})
        return task

    def guard(self, tool: FunctionTool) -> FunctionTool:
        """Makes the tool run only the call its task approved: with the
        approved arguments (a reviewer's edits included), and never for a
        call whose arguments are not the ones Arbiter was asked about
        (ActionDigestMismatch; ActionNotApproved for a call no task
        approved). The call's task is found again by its idempotency key;
        the key is remembered for the server's retention (24 hours by
        default), after which the call is refused rather than asked again
        silently. Returns the tool, changed in place."""
        invoke = tool.on_invoke_tool

        async def guarded(ctx: ToolContext[Any], input_json: str) -> Any:
            args = json.loads(input_json or "{}")
            task = await self._ask(self.run_id(ctx), ctx.tool_call_id, tool.name, args)
            approved = check_call(task, tool.name, args, self.allow)
            return await invoke(ctx, json.dumps(approved.args))

        tool.on_invoke_tool = guarded
        return tool

    def needs_approval(self, tool_name: str) -> ApprovalPolicy:
        """The ``needs_approval`` of the tool named ``tool_name``."""

        async def policy(ctx: RunContextWrapper[Any], arguments: Dict[str, Any], call_id: str) -> bool:
            task = await self._ask(self.run_id(ctx), call_id, tool_name, arguments)
            if not task.final and self.agent_wait > 0:
                task = await self.arbiter.tasks.get(task.id, wait=self.agent_wait)
            allowed = task.status == COMPLETED and task.final_verdict == self.allow
            # Allowed at once, the call runs and its task is done with.
            if allowed:
                self.store.claim(task.id)
            return not allowed

        return policy

    async def submit(self, paused: Union[RunResult, RunState[Any]], run_id: str) -> List[Task]:
        """One Arbiter task per approval item of a paused run (the same
        tasks the policy made, re-attached by their keys)."""
        items = paused.interruptions if isinstance(paused, RunResult) else paused.get_interruptions()
        tasks: List[Task] = []
        for item in items:
            if item.call_id is None or item.tool_name is None:
                continue
            arguments = json.loads(item.arguments or "{}")
            tasks.append(await self._ask(run_id, item.call_id, item.tool_name, arguments))
        return tasks

    async def resume(
        self,
        agent: Agent[Any],
        state: Union[RunState[Any], str],
        decided: Union[Task, Sequence[Task]],
        **run_kwargs: Any,
    ) -> Optional[RunResult]:
        """Approves or rejects the items the decided tasks answer and
        continues the run; ``state`` is the RunState kept when the run
        paused (or its to_string()). None when no task given is final,
        known to this store and not resumed already."""
        if isinstance(state, str):
            state = await RunState.from_string(agent, state)
        tasks = [decided] if isinstance(decided, Task) else list(decided)
        by_call = {item.call_id: item for item in state.get_interruptions()}
        acted = False
        for task in tasks:
            ref = self.store.recall(task.id)
            if not task.final or ref is None or ref["call_id"] not in by_call:
                continue
            if not self.store.claim(task.id):
                continue
            item = by_call[ref["call_id"]]
            decision = Decision.from_task(task)
            if decision.decided and decision.verdict == self.allow:
                state.approve(item)
            else:
                state.reject(item, rejection_message=_rejection(decision))
            acted = True
        if not acted:
            return None
        return await Runner.run(agent, state, **run_kwargs)


def _rejection(d: Decision) -> str:
    if not d.decided:
        return "The call was not approved: nobody decided in time."
    who = "a reviewer" if d.tier == "human" else "the verifier"
    reason = f" Reason: {d.rationale}" if d.rationale else ""
    return f"The call was rejected by {who} ({d.verdict}).{reason}"
