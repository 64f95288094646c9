"""The blocking client against a real server."""

from __future__ import annotations

import secrets
import threading
from typing import List, Optional

import pytest

import arbiterhq
from arbiterhq import Arbiter, Task

from conftest import Account
from harness import Proxy, Receiver, Reviewer, Server, free_port, wait_for


def _source() -> str:
    return "sdk-" + secrets.token_hex(4)


def test_ask_returns_the_agents_verdict(arbiter: Arbiter) -> None:
    task = arbiter.ask("Approve this refund?", ["approve", "reject"], {"auto": "approve"}, wait=30)
    assert task.status == arbiterhq.COMPLETED
    assert task.final_verdict == "approve"
    assert task.final_tier == arbiterhq.TIER_AGENT
    assert task.final_confidence == pytest.approx(0.99)
    assert task.attempts[0].model == "rules"


def test_create_task_sends_every_field(arbiter: Arbiter) -> None:
    src = _source()
    task = arbiter.tasks.create(
        prompt="Refund?", allowed_verdicts=["approve", "reject"], context={"auto": "reject"}, confidence_threshold=0.5,
        task_type="refund", touchpoint="email", source=src, deadline_seconds=3600, audit_rate=0,
    )
    assert (task.task_type, task.touchpoint, task.source) == ("refund", "email", src)
    assert task.confidence_threshold == 0.5
    assert task.deadline_at == pytest.approx(task.created_at + 3600, abs=0.01)
    done = arbiter.tasks.wait(task.id, timeout=30)
    assert done.final_verdict == "reject"


def test_create_task_asks_several_votes_and_names_its_channels(arbiter: Arbiter) -> None:
    task = arbiter.tasks.create(
        prompt="Release the payment?", allowed_verdicts=["approve", "reject"], context={"auto": "review", "amount": "900 EUR"},
        reviews_required=3, consensus="quorum", quorum=2, veto=["reject"],
        requested_by="CFO@example.com", exclude_requester=True, tiebreak="role:admin",
        notify=["slack:#payments"], display={"fields": [{"field": "amount"}]},
    )
    assert task.review == arbiterhq.ReviewRequirement(
        reviews_required=3, consensus="quorum", quorum=2, veto=["reject"],
        requested_by="cfo@example.com", exclude_requester=True, tiebreak="role:admin",
    )
    assert arbiter.tasks.get(task.id).review == task.review
    assert task.display == arbiterhq.Display(fields=[arbiterhq.DisplayField(field="amount")])
    assert task.extra == {}
    with pytest.raises(arbiterhq.BadRequestError) as bad:
        arbiter.tasks.create(prompt="Release?", allowed_verdicts=["approve", "reject"], notify=["#payments"])
    assert bad.value.field == "notify"
    with pytest.raises(arbiterhq.BadRequestError) as bad:
        arbiter.tasks.create(prompt="Release?", allowed_verdicts=["approve", "reject"], reviews_required=2, consensus="quorum", quorum=1)
    assert bad.value.field == "quorum"
    with pytest.raises(TypeError):
        arbiter.tasks.create(prompt="Release?", allowed_verdicts=["approve", "reject"], veto="reject")


def test_idempotent_replay_makes_one_task(arbiter: Arbiter) -> None:
    key = "order-" + secrets.token_hex(6)
    first = arbiter.tasks.create(prompt="Refund order 1?", allowed_verdicts=["approve", "reject"], idempotency_key=key)
    again = arbiter.tasks.create(prompt="Refund order 1?", allowed_verdicts=["approve", "reject"], idempotency_key=key)
    assert again.id == first.id
    with pytest.raises(arbiterhq.IdempotencyMismatchError) as e:
        arbiter.tasks.create(prompt="Refund order 2?", allowed_verdicts=["approve", "reject"], idempotency_key=key)
    assert e.value.status == 422


def test_batch_answers_each_item(arbiter: Arbiter) -> None:
    key = "batch-" + secrets.token_hex(6)
    results = arbiter.tasks.create_batch([
        {"prompt": "One?", "allowed_verdicts": ["yes", "no"], "idempotency_key": key},
        {"prompt": "", "allowed_verdicts": ["yes", "no"]},
        {"prompt": "One?", "allowed_verdicts": ["yes", "no"], "idempotency_key": key},
    ])
    assert [r.status for r in results] == [200, 400, 200]
    assert results[0].ok and not results[0].replayed
    assert isinstance(results[1].error, arbiterhq.BadRequestError)
    assert "prompt" in str(results[1].error)
    assert results[2].replayed
    assert results[2].task is not None and results[0].task is not None
    assert results[2].task.id == results[0].task.id


def test_list_follows_the_cursor_through_pages(arbiter: Arbiter) -> None:
    src = _source()
    made = arbiter.tasks.create_batch([{"prompt": f"Task {i}?", "allowed_verdicts": ["yes", "no"], "source": src} for i in range(7)])
    ids = {r.task.id for r in made if r.task is not None}
    assert len(ids) == 7
    listed = list(arbiter.tasks.list(source=src, limit=3))
    assert [t.id for t in listed if t.id in ids] == [t.id for t in listed]
    assert {t.id for t in listed} == ids
    assert len(listed) == 7
    assert [t.created_at for t in listed] == sorted((t.created_at for t in listed), reverse=True)


def _wait_in_background(arbiter: Arbiter, task_id: str) -> "tuple[threading.Thread, List[Task]]":
    got: List[Task] = []
    t = threading.Thread(target=lambda: got.append(arbiter.tasks.wait(task_id, timeout=60)))
    t.start()
    return t, got


def test_wait_returns_when_a_person_decides(arbiter: Arbiter, reviewer: Reviewer) -> None:
    task = arbiter.tasks.create(prompt="Ship the order to a new address?", allowed_verdicts=["ship", "hold"])
    wait_for(lambda: arbiter.tasks.get(task.id).status == arbiterhq.HUMAN_NEEDED, "the task to reach a person")
    waiting, got = _wait_in_background(arbiter, task.id)
    reviewer.decide(task.id, "hold", "The address changed an hour ago.")
    waiting.join(60)
    assert got, "wait_task did not return"
    done = got[0]
    assert done.status == arbiterhq.COMPLETED
    assert (done.final_verdict, done.final_tier) == ("hold", arbiterhq.TIER_HUMAN)
    assert done.rationale == "The address changed an hour ago."
    assert done.attempts[-1].reviewer == reviewer.email


def test_a_gold_task_goes_to_a_person_and_completes_with_its_gold_verdict(arbiter: Arbiter, reviewer: Reviewer) -> None:
    task = arbiter.tasks.create(prompt="Ship the order to a new address?", allowed_verdicts=["ship", "hold"], gold_verdict="hold")
    assert task.status == arbiterhq.HUMAN_NEEDED
    assert arbiter.tasks.get(task.id).gold_verdict == "hold"
    with pytest.raises(arbiterhq.BadRequestError):
        arbiter.tasks.create(prompt="Ship?", allowed_verdicts=["ship", "hold"], gold_verdict="maybe")
    reviewer.decide(task.id, "ship", "Looks fine.")
    done = arbiter.tasks.wait(task.id, timeout=30)
    assert (done.final_verdict, done.final_tier) == ("hold", arbiterhq.TIER_HUMAN)
    assert done.attempts[-1].verdict == "ship"


def test_wait_timeout_carries_the_last_read(arbiter: Arbiter) -> None:
    task = arbiter.tasks.create(prompt="Nobody is looking?", allowed_verdicts=["yes", "no"])
    with pytest.raises(arbiterhq.WaitTimeoutError) as e:
        arbiter.tasks.wait(task.id, timeout=1.5)
    assert e.value.task is not None and e.value.task.id == task.id
    assert not e.value.task.final


def test_errors_are_typed(server: Server, arbiter: Arbiter, account: Account) -> None:
    with pytest.raises(arbiterhq.BadRequestError) as bad:
        arbiter.tasks.create(prompt="Threshold?", allowed_verdicts=["yes"], confidence_threshold=1.5)
    assert bad.value.status == 400 and "confidence_threshold" in bad.value.message
    assert (bad.value.code, bad.value.field) == ("invalid_field", "confidence_threshold")
    assert bad.value.request_id and bad.value.request_id.startswith("req_")

    with pytest.raises(arbiterhq.AuthenticationError):
        Arbiter("svc_live_" + "0" * 28, base_url=server.base_url).tasks.get("tsk_0000000000000000")

    theirs = Account(server).client().tasks.create(prompt="Theirs?", allowed_verdicts=["yes", "no"])
    with pytest.raises(arbiterhq.NotFoundError) as nf:
        arbiter.tasks.get(theirs.id)
    assert nf.value.status == 404

    with pytest.raises(arbiterhq.PayloadTooLargeError):
        arbiter.tasks.create(prompt="Big?", allowed_verdicts=["yes"], context={"blob": "x" * (1 << 20)})

    capped = Account(server)
    server.admin("set-cap", "--email", capped.email, "--cap", "1")
    with capped.client() as c:
        c.tasks.create(prompt="First?", allowed_verdicts=["yes"])
        with pytest.raises(arbiterhq.RateLimitError) as rl:
            c.tasks.create(prompt="Second?", allowed_verdicts=["yes"])
    # The daily cap asks for hours, past the client's longest wait: no retry.
    assert rl.value.retry_after is not None and rl.value.retry_after > 60

    with pytest.raises(arbiterhq.APIConnectionError):
        Arbiter(account.key, base_url=f"http://127.0.0.1:{free_port()}", max_retries=1).tasks.get("tsk_0000000000000000")


def test_no_key_is_refused_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SVC_API_KEY", raising=False)
    with pytest.raises(ValueError, match="SVC_API_KEY"):
        Arbiter()


def test_key_and_address_come_from_the_environment(monkeypatch: pytest.MonkeyPatch, server: Server, account: Account) -> None:
    monkeypatch.setenv("SVC_API_KEY", account.key)
    monkeypatch.setenv("SVC_BASE_URL", server.base_url)
    with Arbiter() as a:
        assert a.tasks.create(prompt="From the environment?", allowed_verdicts=["yes"]).status in (arbiterhq.PENDING, arbiterhq.AGENT_RUNNING, arbiterhq.HUMAN_NEEDED)


@pytest.mark.parametrize("status", [429, 503, 409])
def test_retry_after_is_honoured_and_a_create_is_made_once(server: Server, account: Account, status: int) -> None:
    proxy = Proxy(server.base_url, [(status, {"Retry-After": "1"})])
    try:
        src = _source()
        with Arbiter(account.key, base_url=proxy.url) as a:
            task = a.tasks.create(prompt="Retried?", allowed_verdicts=["yes", "no"], source=src)
        assert len(proxy.seen) == 2
        (t0, _, key0), (t1, _, key1) = proxy.seen
        assert t1 - t0 >= 1.0, "the retry came before Retry-After"
        assert key0 is not None and key0 == key1, "a retry must carry the same idempotency key"
        with account.client() as a:
            assert [t.id for t in a.tasks.list(source=src)] == [task.id]
    finally:
        proxy.close()


def test_unavailable_after_the_retries_run_out(server: Server, account: Account) -> None:
    proxy = Proxy(server.base_url, [(503, {"Retry-After": "0"})] * 3)
    try:
        with Arbiter(account.key, base_url=proxy.url, max_retries=2) as a:
            with pytest.raises(arbiterhq.ServiceUnavailableError) as e:
                a.tasks.get("tsk_0000000000000000")
        assert e.value.retry_after == 0
        assert len(proxy.seen) == 3
    finally:
        proxy.close()


def test_a_retry_after_longer_than_the_longest_wait_is_not_waited(server: Server, account: Account) -> None:
    proxy = Proxy(server.base_url, [(429, {"Retry-After": "120"})])
    try:
        with Arbiter(account.key, base_url=proxy.url, max_retry_wait=5) as a:
            with pytest.raises(arbiterhq.RateLimitError) as e:
                a.tasks.create(prompt="Later?", allowed_verdicts=["yes"])
        assert e.value.retry_after == 120
        assert len(proxy.seen) == 1
    finally:
        proxy.close()


def test_webhooks_the_server_sent_verify_and_a_tampered_one_does_not(arbiter: Arbiter, reviewer: Reviewer) -> None:
    receiver = Receiver()
    try:
        secret = reviewer.callback_secret()
        task = arbiter.tasks.create(prompt="Callback?", allowed_verdicts=["approve", "reject"], context={"auto": "approve"}, callback_url=receiver.url)
        headers, body = wait_for(lambda: receiver.for_task(task.id, "task.completed"), "the task.completed callback")
        event = arbiterhq.verify_webhook(body, headers, secret)
        assert isinstance(event, arbiterhq.WebhookTaskEvent)
        assert event.type == "task.completed"
        assert (event.data.id, event.data.final_verdict, event.data.final_tier) == (task.id, "approve", arbiterhq.TIER_AGENT)

        tampered = body.replace(b'"approve"', b'"reject"', 1)
        with pytest.raises(arbiterhq.WebhookVerificationError):
            arbiterhq.verify_webhook(tampered, headers, secret)
        other = "whsec_" + "A" * 43 + "="
        with pytest.raises(arbiterhq.WebhookVerificationError):
            arbiterhq.verify_webhook(body, headers, other)
        stale: Optional[float] = float(headers["webhook-timestamp"]) + 301
        with pytest.raises(arbiterhq.WebhookVerificationError):
            arbiterhq.verify_webhook(body, headers, secret, now=stale)
    finally:
        receiver.close()


def test_policies_are_put_read_listed_and_deleted(arbiter: Arbiter, account: Account) -> None:
    task_type = "refund-" + secrets.token_hex(4)
    put = arbiter.policies.update(task_type, confidence_threshold=0.95, deadline_seconds=600,
                                  on_expiry="agent_verdict", agent_floor=0.9, on_expiry_fallback="verdict:reject")
    assert (put.task_type, put.on_expiry, put.audit_rate) == (task_type, "agent_verdict", None)
    assert arbiter.policies.get(task_type) == put
    assert any(p.task_type == task_type for p in arbiter.policies.list())
    with pytest.raises(arbiterhq.BadRequestError):
        arbiter.policies.update(task_type, on_expiry="agent_verdict")

    task = arbiter.tasks.create(prompt="Refund?", allowed_verdicts=["approve", "reject"], task_type=task_type)
    assert task.confidence_threshold == 0.95
    assert task.deadline_at == pytest.approx(task.created_at + 600, abs=0.01)
    given = arbiter.tasks.create(prompt="Refund?", allowed_verdicts=["approve", "reject"], task_type=task_type, on_expiry="verdict:approve", confidence_threshold=0.5)
    assert given.confidence_threshold == 0.5

    routed = arbiter.policies.update(task_type, notify=["slack:#refunds"], reviews_required=3, consensus="quorum", quorum=2,
                                     veto=["reject"], tiebreak="role:admin")
    assert (routed.notify, routed.reviews_required, routed.consensus, routed.quorum, routed.veto,
            routed.exclude_requester, routed.tiebreak) == (["slack:#refunds"], 3, "quorum", 2, ["reject"], False, "role:admin")
    assert arbiter.policies.get(task_type) == routed
    with pytest.raises(arbiterhq.BadRequestError):
        arbiter.policies.update(task_type, notify=["#refunds"])
    with pytest.raises(arbiterhq.BadRequestError):
        arbiter.policies.update(task_type, reviews_required=2, consensus="any")

    arbiter.policies.delete(task_type)
    with pytest.raises(arbiterhq.NotFoundError):
        arbiter.policies.get(task_type)

    put = arbiter.policies.update(task_type, deadline_seconds=3600, reminders=["1h", "15m"],
                                  escalation=[{"after": "30m", "to": "role:admin"}])
    assert (put.reminders, put.escalation) == (["15m", "1h"], [arbiterhq.EscalationRung(after="30m", to="role:admin")])
    with pytest.raises(arbiterhq.BadRequestError):
        arbiter.tasks.create(prompt="Refund?", allowed_verdicts=["approve"], reminders=["50%"])
    with pytest.raises(arbiterhq.BadRequestError, match="not a member"):
        arbiter.tasks.create(prompt="Refund?", allowed_verdicts=["approve"], escalation=[{"after": "2h", "to": "email:lead@example.com"}])
    own = arbiter.tasks.create(prompt="Refund?", allowed_verdicts=["approve"], task_type=task_type, reminders=[], escalation=[{"after": "2h", "to": "email:" + account.email}])
    assert own.escalation is None and own.extra == {}
    arbiter.policies.delete(task_type)
    with pytest.raises(arbiterhq.NotFoundError):
        arbiter.policies.delete(task_type)
