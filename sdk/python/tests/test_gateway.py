"""`arbiter gateway` between the official Python MCP SDK (`mcp`) on both
sides: its client (mcp.Client over stdio) is the agent, and a server
written with its MCPServer (tests/gateway_upstream.py) is the upstream,
each a process of its own, against the run's real `arbiter serve`. The
policy holds every transfer; a person decides its task on the desk."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List

import httpx
from mcp import Client, StdioServerParameters

from conftest import Account
from harness import Reviewer, Server, wait_for

POLICY = """\
rules:
  - tool: echo
    allow: true
  - tool: transfer
    ask:
      task_type: transfer
"""

UPSTREAM = Path(__file__).resolve().parent / "gateway_upstream.py"


class Gateway:
    """The command line of a gateway in front of the Python upstream, its
    execution log, and the account's gateway tasks."""

    def __init__(self, server: Server, account: Account, tmp: Path) -> None:
        self.server = server
        self.account = account
        self.log = tmp / "executions.jsonl"
        policy = tmp / "policy.yaml"
        policy.write_text(POLICY)
        upstream = f"env GATEWAY_UPSTREAM_LOG='{self.log}' '{sys.executable}' '{UPSTREAM}'"
        self.params = StdioServerParameters(
            command=str(server.bin),
            args=["gateway", "--upstream-cmd", upstream, "--policy", str(policy), "--state", str(tmp / "state.json")],
            env={**os.environ, "SVC_API_KEY": account.key, "SVC_BASE_URL": server.base_url},
        )

    def executions(self) -> List[Dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def tasks(self) -> List[Dict[str, Any]]:
        r = httpx.get(
            self.server.base_url + "/v1/tasks",
            params={"source": "arbiter-gateway", "limit": "100"},
            headers={"Authorization": "Bearer " + self.account.key},
        )
        assert r.status_code == 200, r.text
        tasks: List[Dict[str, Any]] = r.json()["tasks"]
        return tasks

    def held(self) -> Dict[str, Any]:
        """Waits for the one task of a held call to wait for a person."""

        def waiting() -> Any:
            tasks = self.tasks()
            assert len(tasks) <= 1, tasks
            return tasks[0] if tasks and tasks[0]["status"] == "human_needed" else None

        task: Dict[str, Any] = wait_for(waiting, "the held call's task")
        return task


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def held_call(gw: Gateway, reviewer: Reviewer, verdict: str, rationale: str) -> Any:
    """Calls transfer through the gateway; once its task waits, decides it
    on the desk; returns the call's result."""
    async with Client(gw.params) as agent:
        names = {t.name for t in (await agent.list_tools()).tools}
        assert names == {"transfer", "echo"}, names
        echoed = await agent.call_tool("echo", {"message": "passes through"})
        assert not echoed.is_error and text_of(echoed) == "passes through"
        call = asyncio.ensure_future(agent.call_tool("transfer", {"to": "acc_2", "amount": 500}))
        task = await asyncio.to_thread(gw.held)
        assert task["action"]["name"] == "transfer" and task["action"]["args"] == {"to": "acc_2", "amount": 500}
        assert gw.executions() == [], "the upstream ran a held call before its decision"
        await asyncio.to_thread(reviewer.decide, task["id"], verdict, rationale, task["action"]["digest"])
        result = await call
        assert len(gw.tasks()) == 1
        return task, result


def fresh(server: Server) -> tuple[Account, Reviewer]:
    account = Account(server)
    return account, Reviewer(server, account.email)


def test_gateway_python_client_approved_call_runs_once(server: Server, tmp_path: Path) -> None:
    account, reviewer = fresh(server)
    gw = Gateway(server, account, tmp_path)
    try:
        task, result = asyncio.run(held_call(gw, reviewer, "approve", "Rent is due."))
    finally:
        reviewer.close()
    assert not result.is_error, text_of(result)
    assert text_of(result) == "Transferred 500 EUR to acc_2."
    assert gw.executions() == [{"tool": "transfer", "args": {"to": "acc_2", "amount": 500}}]
    # Arbiter holds the one claim: another is refused.
    r = httpx.get(server.base_url + "/v1/tasks/" + task["id"], headers={"Authorization": "Bearer " + account.key})
    approved = r.json()["approved_action"]
    r = httpx.post(
        server.base_url + "/v1/tasks/" + task["id"] + "/execution",
        json={"digest": approved["digest"], "claim_id": "another"},
        headers={"Authorization": "Bearer " + account.key},
    )
    assert r.status_code == 409 and r.json()["code"] == "already_executed", r.text


def test_gateway_python_client_rejected_call_returns_the_refusal(server: Server, tmp_path: Path) -> None:
    account, reviewer = fresh(server)
    gw = Gateway(server, account, tmp_path)
    try:
        _, result = asyncio.run(held_call(gw, reviewer, "reject", "acc_2 is not a payee we know."))
    finally:
        reviewer.close()
    assert result.is_error
    assert "acc_2 is not a payee we know." in text_of(result) and "not made" in text_of(result), text_of(result)
    assert gw.executions() == []
