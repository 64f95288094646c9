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
    task = arbiter.create_task(
        "Refund?", ["approve", "reject"], context={"auto": "reject"}, confidence_threshold=0.5,
        task_type="refund", touchpoint="email", source=src, deadline_seconds=3600, audit_rate=0,
    )
    assert (task.task_type, task.touchpoint, task.source) == ("refund", "email", src)
    assert task.confidence_threshold == 0.5
    assert task.deadline_at == pytest.approx(task.created_at + 3600, abs=0.01)
    done = arbiter.wait_task(task.id, timeout=30)
    assert done.final_verdict == "reject"


def test_create_task_asks_several_votes_and_names_its_channels(arbiter: Arbiter) -> None:
    task = arbiter.create_task(
        "Release the payment?", ["approve", "reject"], context={"auto": "review", "amount": "900 EUR"},
        reviews_required=3, consensus="quorum", quorum=2, veto=["reject"],
        requested_by="CFO@example.com", exclude_requester=True, tiebreak="role:admin",
        notify=["slack:#payments"], display={"fields": [{"field": "amount"}]},
    )
    assert task.extra["review"] == {
        "reviews_required": 3, "consensus": "quorum", "quorum": 2, "veto": ["reject"],
        "requested_by": "cfo@example.com", "exclude_requester": True, "tiebreak": "role:admin",
    }
    assert arbiter.get_task(task.id).extra["review"] == task.extra["review"]
    assert task.extra["display"] == {"fields": [{"field": "amount"}]}
    with pytest.raises(arbiterhq.BadRequest) as bad:
        arbiter.create_task("Release?", ["approve", "reject"], notify=["#payments"])
    assert bad.value.field == "notify"
    with pytest.raises(arbiterhq.BadRequest) as bad:
        arbiter.create_task("Release?", ["approve", "reject"], reviews_required=2, consensus="quorum", quorum=1)
    assert bad.value.field == "quorum"
    with pytest.raises(TypeError):
        arbiter.create_task("Release?", ["approve", "reject"], veto="reject")


def test_idempotent_replay_makes_one_task(arbiter: Arbiter) -> None:
    key = "order-" + secrets.token_hex(6)
    first = arbiter.create_task("Refund order 1?", ["approve", "reject"], idempotency_key=key)
    again = arbiter.create_task("Refund order 1?", ["approve", "reject"], idempotency_key=key)
    assert again.id == first.id
    with pytest.raises(arbiterhq.IdempotencyMismatch) as e:
        arbiter.create_task("Refund order 2?", ["approve", "reject"], idempotency_key=key)
    assert e.value.status == 422


def test_batch_answers_each_item(arbiter: Arbiter) -> None:
    key = "batch-" + secrets.token_hex(6)
    results = arbiter.create_tasks([
        {"prompt": "One?", "allowed_verdicts": ["yes", "no"], "idempotency_key": key},
        {"prompt": "", "allowed_verdicts": ["yes", "no"]},
        {"prompt": "One?", "allowed_verdicts": ["yes", "no"], "idempotency_key": key},
    ])
    assert [r.status for r in results] == [200, 400, 200]
    assert results[0].ok and not results[0].replayed
    assert isinstance(results[1].error, arbiterhq.BadRequest)
    assert "prompt" in str(results[1].error)
    assert results[2].replayed
    assert results[2].task is not None and results[0].task is not None
    assert results[2].task.id == results[0].task.id


def test_list_follows_the_cursor_through_pages(arbiter: Arbiter) -> None:
    src = _source()
    made = arbiter.create_tasks([{"prompt": f"Task {i}?", "allowed_verdicts": ["yes", "no"], "source": src} for i in range(7)])
    ids = {r.task.id for r in made if r.task is not None}
    assert len(ids) == 7
    listed = list(arbiter.list_tasks(source=src, page_size=3))
    assert [t.id for t in listed if t.id in ids] == [t.id for t in listed]
    assert {t.id for t in listed} == ids
    assert len(listed) == 7
    assert [t.created_at for t in listed] == sorted((t.created_at for t in listed), reverse=True)


def _wait_in_background(arbiter: Arbiter, task_id: str) -> "tuple[threading.Thread, List[Task]]":
    got: List[Task] = []
    t = threading.Thread(target=lambda: got.append(arbiter.wait_task(task_id, timeout=60)))
    t.start()
    return t, got


def test_wait_returns_when_a_person_decides(arbiter: Arbiter, reviewer: Reviewer) -> None:
    task = arbiter.create_task("Ship the order to a new address?", ["ship", "hold"])
    wait_for(lambda: arbiter.get_task(task.id).status == arbiterhq.HUMAN_NEEDED, "the task to reach a person")
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
    task = arbiter.create_task("Ship the order to a new address?", ["ship", "hold"], gold_verdict="hold")
    assert task.status == arbiterhq.HUMAN_NEEDED
    assert arbiter.get_task(task.id).gold_verdict == "hold"
    with pytest.raises(arbiterhq.BadRequest):
        arbiter.create_task("Ship?", ["ship", "hold"], gold_verdict="maybe")
    reviewer.decide(task.id, "ship", "Looks fine.")
    done = arbiter.wait_task(task.id, timeout=30)
    assert (done.final_verdict, done.final_tier) == ("hold", arbiterhq.TIER_HUMAN)
    assert done.attempts[-1].verdict == "ship"


def test_wait_timeout_carries_the_last_read(arbiter: Arbiter) -> None:
    task = arbiter.create_task("Nobody is looking?", ["yes", "no"])
    with pytest.raises(arbiterhq.WaitTimeout) as e:
        arbiter.wait_task(task.id, timeout=1.5)
    assert e.value.task is not None and e.value.task.id == task.id
    assert not e.value.task.final


def test_errors_are_typed(server: Server, arbiter: Arbiter, account: Account) -> None:
    with pytest.raises(arbiterhq.BadRequest) as bad:
        arbiter.create_task("Threshold?", ["yes"], confidence_threshold=1.5)
    assert bad.value.status == 400 and "confidence_threshold" in bad.value.message
    assert (bad.value.code, bad.value.field) == ("invalid_field", "confidence_threshold")
    assert bad.value.request_id and bad.value.request_id.startswith("req_")

    with pytest.raises(arbiterhq.Unauthorized):
        Arbiter("svc_live_" + "0" * 28, base_url=server.base_url).get_task("tsk_0000000000000000")

    theirs = Account(server).client().create_task("Theirs?", ["yes", "no"])
    with pytest.raises(arbiterhq.NotFound) as nf:
        arbiter.get_task(theirs.id)
    assert nf.value.status == 404

    with pytest.raises(arbiterhq.PayloadTooLarge):
        arbiter.create_task("Big?", ["yes"], context={"blob": "x" * (1 << 20)})

    capped = Account(server)
    server.admin("set-cap", "--email", capped.email, "--cap", "1")
    with capped.client() as c:
        c.create_task("First?", ["yes"])
        with pytest.raises(arbiterhq.RateLimited) as rl:
            c.create_task("Second?", ["yes"])
    # The daily cap asks for hours, past the client's longest wait: no retry.
    assert rl.value.retry_after is not None and rl.value.retry_after > 60

    with pytest.raises(arbiterhq.APIConnectionError):
        Arbiter(account.key, base_url=f"http://127.0.0.1:{free_port()}", max_retries=1).get_task("tsk_0000000000000000")


def test_no_key_is_refused_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SVC_API_KEY", raising=False)
    with pytest.raises(ValueError, match="SVC_API_KEY"):
        Arbiter()


def test_key_and_address_come_from_the_environment(monkeypatch: pytest.MonkeyPatch, server: Server, account: Account) -> None:
    monkeypatch.setenv("SVC_API_KEY", account.key)
    monkeypatch.setenv("SVC_BASE_URL", server.base_url)
    with Arbiter() as a:
        assert a.create_task("From the environment?", ["yes"]).status in (arbiterhq.PENDING, arbiterhq.AGENT_RUNNING, arbiterhq.HUMAN_NEEDED)


@pytest.mark.parametrize("status", [429, 503, 409])
def test_retry_after_is_honoured_and_a_create_is_made_once(server: Server, account: Account, status: int) -> None:
    proxy = Proxy(server.base_url, [(status, {"Retry-After": "1"})])
    try:
        src = _source()
        with Arbiter(account.key, base_url=proxy.url) as a:
            task = a.create_task("Retried?", ["yes", "no"], source=src)
        assert len(proxy.seen) == 2
        (t0, _, key0), (t1, _, key1) = proxy.seen
        assert t1 - t0 >= 1.0, "the retry came before Retry-After"
        assert key0 is not None and key0 == key1, "a retry must carry the same idempotency key"
        with account.client() as a:
            assert [t.id for t in a.list_tasks(source=src)] == [task.id]
    finally:
        proxy.close()


def test_unavailable_after_the_retries_run_out(server: Server, account: Account) -> None:
    proxy = Proxy(server.base_url, [(503, {"Retry-After": "0"})] * 3)
    try:
        with Arbiter(account.key, base_url=proxy.url, max_retries=2) as a:
            with pytest.raises(arbiterhq.Unavailable) as e:
                a.get_task("tsk_0000000000000000")
        assert e.value.retry_after == 0
        assert len(proxy.seen) == 3
    finally:
        proxy.close()


def test_a_retry_after_longer_than_the_longest_wait_is_not_waited(server: Server, account: Account) -> None:
    proxy = Proxy(server.base_url, [(429, {"Retry-After": "120"})])
    try:
        with Arbiter(account.key, base_url=proxy.url, max_retry_wait=5) as a:
            with pytest.raises(arbiterhq.RateLimited) as e:
                a.create_task("Later?", ["yes"])
        assert e.value.retry_after == 120
        assert len(proxy.seen) == 1
    finally:
        proxy.close()


def test_webhooks_the_server_sent_verify_and_a_tampered_one_does_not(arbiter: Arbiter, reviewer: Reviewer) -> None:
    receiver = Receiver()
    try:
        secret = reviewer.callback_secret()
        task = arbiter.create_task("Callback?", ["approve", "reject"], context={"auto": "approve"}, callback_url=receiver.url)
        headers, body = wait_for(lambda: receiver.for_task(task.id, "task.completed"), "the task.completed callback")
        event = arbiterhq.verify_webhook(body, headers, secret)
        assert event["type"] == "task.completed"
        assert event["data"]["final_verdict"] == "approve"

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


def test_policies_are_put_read_listed_and_deleted(arbiter: Arbiter) -> None:
    task_type = "refund-" + secrets.token_hex(4)
    put = arbiter.put_policy(task_type, confidence_threshold=0.95, deadline_seconds=600,
                             on_expiry="agent_verdict", agent_floor=0.9, on_expiry_fallback="verdict:reject")
    assert (put["task_type"], put["on_expiry"], put["audit_rate"]) == (task_type, "agent_verdict", None)
    assert arbiter.get_policy(task_type) == put
    assert any(p["task_type"] == task_type for p in arbiter.list_policies())
    with pytest.raises(arbiterhq.BadRequest):
        arbiter.put_policy(task_type, on_expiry="agent_verdict")

    task = arbiter.create_task("Refund?", ["approve", "reject"], task_type=task_type)
    assert task.confidence_threshold == 0.95
    assert task.deadline_at == pytest.approx(task.created_at + 600, abs=0.01)
    given = arbiter.create_task("Refund?", ["approve", "reject"], task_type=task_type, on_expiry="verdict:approve", confidence_threshold=0.5)
    assert given.confidence_threshold == 0.5

    routed = arbiter.put_policy(task_type, notify=["slack:#refunds"], reviews_required=3, consensus="quorum", quorum=2,
                                veto=["reject"], tiebreak="role:admin")
    assert (routed["notify"], routed["reviews_required"], routed["consensus"], routed["quorum"], routed["veto"],
            routed["exclude_requester"], routed["tiebreak"]) == (["slack:#refunds"], 3, "quorum", 2, ["reject"], False, "role:admin")
    assert arbiter.get_policy(task_type) == routed
    with pytest.raises(arbiterhq.BadRequest):
        arbiter.put_policy(task_type, notify=["#refunds"])
    with pytest.raises(arbiterhq.BadRequest):
        arbiter.put_policy(task_type, reviews_required=2, consensus="any")

    arbiter.delete_policy(task_type)
    with pytest.raises(arbiterhq.NotFound):
        arbiter.get_policy(task_type)

    put = arbiter.put_policy(task_type, deadline_seconds=3600, reminders=["1h", "15m"],
                             escalation=[{"after": "30m", "to": "role:admin"}])
    assert (put["reminders"], put["escalation"]) == (["15m", "1h"], [{"after": "30m", "to": "role:admin"}])
    with pytest.raises(arbiterhq.BadRequest):
        arbiter.create_task("Refund?", ["approve"], reminders=["50%"])
    own = arbiter.create_task("Refund?", ["approve"], task_type=task_type, reminders=[], escalation=[{"after": "2h", "to": "email:lead@example.com"}])
    assert own.extra.get("escalation") is None
    arbiter.delete_policy(task_type)
    with pytest.raises(arbiterhq.NotFound):
        arbiter.delete_policy(task_type)
