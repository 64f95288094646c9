"""The client's shape against a real server: its resources, per-call
options, pages, the answer each object came in, waits and the environment."""

from __future__ import annotations

import asyncio
import inspect
import secrets
import time
from typing import List

import pytest

import arbiterhq
from arbiterhq import Arbiter, AsyncArbiter

from conftest import Account
from harness import Proxy, Reviewer, Server, wait_for


def _source() -> str:
    return "sdk-res-" + secrets.token_hex(4)


def test_calibration_reads_the_audit_a_person_answered(arbiter: Arbiter, reviewer: Reviewer) -> None:
    src = _source()
    task = arbiter.ask("Refund?", ["approve", "reject"], {"auto": "approve"}, wait=30, source=src, audit_rate=1)
    assert (task.final_verdict, task.final_tier) == ("approve", arbiterhq.TIER_AGENT)
    reviewer.decide(task.id, "reject", "Not this one.")

    def counted() -> "arbiterhq.CalibrationReport | None":
        r = arbiter.calibration.get(source=src)
        return r if r.n == 1 else None

    report = wait_for(counted, "the audit to be counted")
    assert isinstance(report, arbiterhq.CalibrationReport)
    assert (report.audits, report.audits_disagree) == (1, 1)
    assert [d.task_id for d in report.disagreements] == [task.id]
    assert report.disagreements[0].human_verdict == "reject"
    assert report.response is not None and (report.response.request_id or "").startswith("req_")
    with pytest.raises(arbiterhq.BadRequestError) as bad:
        arbiter.calibration.get(target_error_rate=2)
    assert bad.value.field == "target_error_rate"


def test_agreement_reads_the_accounts_reviewers(arbiter: Arbiter) -> None:
    report = arbiter.agreement.get(days=30)
    assert isinstance(report, arbiterhq.AgreementReport)
    assert report.tasks >= 0 and isinstance(report.reviewers, list)
    with pytest.raises(arbiterhq.BadRequestError) as bad:
        arbiter.agreement.get(days=0)
    assert bad.value.field == "days"


def test_a_create_says_its_request_id_and_whether_it_was_replayed(arbiter: Arbiter) -> None:
    key = "resp-" + secrets.token_hex(6)
    first = arbiter.tasks.create(prompt="Replay?", allowed_verdicts=["yes"], idempotency_key=key)
    again = arbiter.tasks.create(prompt="Replay?", allowed_verdicts=["yes"], idempotency_key=key)
    assert first.response is not None and again.response is not None
    assert (first.response.replayed, again.response.replayed) == (False, True)
    assert first.response.request_id and first.response.request_id.startswith("req_")
    assert first.response.request_id != again.response.request_id
    assert first.response.status_code == 200
    read = arbiter.tasks.get(first.id)
    assert read.response is not None and read.response.request_id not in (None, first.response.request_id)
    assert read.attempts == [] or read.attempts[0].response is None


def test_a_page_says_whether_more_follow_and_where_they_start(arbiter: Arbiter) -> None:
    src = _source()
    made = arbiter.tasks.create_batch([{"prompt": f"Page {i}?", "allowed_verdicts": ["yes"], "source": src} for i in range(5)])
    whole = arbiter.tasks.list(source=src, limit=100)
    newest_first = [t.id for t in whole.tasks]
    assert set(newest_first) == {r.task.id for r in made if r.task is not None} and len(newest_first) == 5
    assert not whole.has_more and whole.starting_after is None
    page = arbiter.tasks.list(source=src, limit=2)
    assert [t.id for t in page.tasks] == newest_first[:2]
    assert page.has_more and page.starting_after == newest_first[1]
    second = page.next_page()
    assert second is not None and [t.id for t in second.tasks] == newest_first[2:4]
    by_cursor = arbiter.tasks.list(source=src, limit=2, starting_after=page.starting_after)
    assert [t.id for t in by_cursor.tasks] == newest_first[2:4]
    last = second.next_page()
    assert last is not None and [t.id for t in last.tasks] == newest_first[4:]
    assert not last.has_more and last.starting_after is None and last.next_page() is None
    assert [t.id for t in page] == newest_first

    async def pages() -> "tuple[List[str], List[str], bool]":
        async with AsyncArbiter(arbiter._s.api_key, base_url=arbiter.base_url) as a:
            first = await a.tasks.list(source=src, limit=3)
            every = [t.id async for t in a.tasks.list(source=src, limit=2)]
            return [t.id for t in first.tasks], every, first.has_more

    first3, every, more = asyncio.run(pages())
    assert (first3, every, more) == (newest_first[:3], newest_first, True)


def test_with_options_changes_the_calls_made_through_it(server: Server, account: Account) -> None:
    proxy = Proxy(server.base_url, [(503, {"Retry-After": "0"})] * 2)
    try:
        with Arbiter(account.key, base_url=proxy.url, max_retries=3) as a:
            with pytest.raises(arbiterhq.ServiceUnavailableError):
                a.with_options(max_retries=0).tasks.get("tsk_0000000000000000")
            assert len(proxy.seen) == 1
            with pytest.raises(arbiterhq.NotFoundError):
                a.tasks.get("tsk_0000000000000000")  # one 503 left, then the server
            assert len(proxy.seen) == 3
            assert a.with_options(timeout=5)._s.timeout == 5 and a._s.timeout == arbiterhq._core.DEFAULT_TIMEOUT
            with pytest.raises(ValueError):
                a.with_options(timeout=0)
        # The copy shares the connections, and closing it closes nothing.
        with Arbiter(account.key, base_url=server.base_url) as a:
            quick = a.with_options(timeout=10)
            quick.close()
            assert a.tasks.create(prompt="Still open?", allowed_verdicts=["yes"]).id.startswith("tsk_")
    finally:
        proxy.close()


def test_a_fractional_wait_is_never_cut_short(arbiter: Arbiter) -> None:
    task = arbiter.tasks.create(prompt="Nobody is looking?", allowed_verdicts=["yes", "no"])
    for timeout in (1.5, 0.4):
        start = time.monotonic()
        with pytest.raises(arbiterhq.WaitTimeoutError) as e:
            arbiter.tasks.wait(task.id, timeout=timeout)
        assert time.monotonic() - start >= timeout
        assert e.value.task is not None and e.value.task.id == task.id


def test_waits_are_bounded_unless_told_otherwise() -> None:
    assert 0 < arbiterhq.DEFAULT_WAIT < float("inf")
    for fn in (Arbiter.ask, AsyncArbiter.ask):
        assert inspect.signature(fn).parameters["wait"].default == arbiterhq.DEFAULT_WAIT
    for fn in (arbiterhq.Tasks.wait, arbiterhq.AsyncTasks.wait):
        assert inspect.signature(fn).parameters["timeout"].default == arbiterhq.DEFAULT_WAIT


def test_the_key_and_address_come_from_either_name(monkeypatch: pytest.MonkeyPatch, server: Server, account: Account) -> None:
    for name in ("SVC_API_KEY", "SVC_BASE_URL", "ARBITER_API_KEY", "ARBITER_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ARBITER_API_KEY", account.key)
    monkeypatch.setenv("ARBITER_BASE_URL", server.base_url)
    with Arbiter() as a:
        assert a.base_url == server.base_url
        assert a.tasks.create(prompt="Named for the service?", allowed_verdicts=["yes"]).id.startswith("tsk_")
    # The specification's names come first.
    monkeypatch.setenv("SVC_API_KEY", "svc_live_" + "0" * 28)
    monkeypatch.setenv("SVC_BASE_URL", "http://127.0.0.1:9")
    with Arbiter() as a:
        assert a.base_url == "http://127.0.0.1:9" and a._s.api_key == "svc_live_" + "0" * 28
    for name in ("SVC_API_KEY", "ARBITER_API_KEY"):
        monkeypatch.delenv(name)
    with pytest.raises(ValueError, match="SVC_API_KEY.*ARBITER_API_KEY"):
        Arbiter()
