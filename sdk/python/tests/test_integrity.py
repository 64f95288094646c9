"""Approval integrity offline: the RFC 8785 form and digests of the shared
vectors (testdata/jcs), the receipt vectors (testdata/receipts), and what
approved_action refuses. The same files are checked by Go and TypeScript."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Dict

import pytest

from arbiterhq import (
    ActionDigestMismatch,
    ActionNotApproved,
    ReceiptInvalid,
    Task,
    action_digest,
    approved_action,
    canonical_json,
    verify_receipt,
)

TESTDATA = Path(__file__).resolve().parents[3] / "testdata"


def test_canonical_json_rfc8785_vectors() -> None:
    vectors = json.loads((TESTDATA / "jcs" / "vectors.json").read_text(encoding="utf-8"))
    assert vectors["canonical"], "no vectors read"
    for v in vectors["canonical"]:
        assert canonical_json(json.loads(v["input"])) == v["canonical"], v["name"]


def test_canonical_json_numbers_as_ecmascript_writes_them() -> None:
    lines = (TESTDATA / "jcs" / "numbers.txt").read_text().splitlines()
    assert len(lines) >= 5000
    for line in lines:
        bits, want = line.split(",")
        x = struct.unpack(">d", bytes.fromhex(bits))[0]
        assert canonical_json(x) == want, bits


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 2**53, -(2**53), "\ud800"])
def test_canonical_json_refuses_what_has_no_form(value: Any) -> None:
    with pytest.raises(ValueError):
        canonical_json({"a": value})


def test_action_digest_vectors() -> None:
    vectors = json.loads((TESTDATA / "jcs" / "digests.json").read_text(encoding="utf-8"))
    assert vectors
    for v in vectors:
        assert canonical_json(json.loads(v["args_text"])) == v["canonical_args"], v["name"]
        assert action_digest(v["name"], json.loads(v["args_text"])) == v["digest"], v["name"]


def _task(args: Dict[str, Any], digest: str, verdict: str = "approve", status: str = "completed") -> Task:
    return Task.from_dict({
        "id": "tsk_0123456789abcdef", "status": status, "task_type": "t", "source": "", "touchpoint": "t",
        "prompt": "p", "allowed_verdicts": ["approve", "reject"], "confidence_threshold": 0.8,
        "final_verdict": verdict if status == "completed" else None, "final_tier": "human", "final_confidence": 1.0,
        "created_at": 1, "completed_at": 2, "deadline_at": None, "expired_at": None, "attempts": [],
        "action": {"name": "issue_refund", "args": {"amount": 120}, "digest": action_digest("issue_refund", {"amount": 120})},
        "approved_action": {"name": "issue_refund", "args": args, "digest": digest, "edited": True,
                            "proposed_digest": action_digest("issue_refund", {"amount": 120})},
    })


def test_approved_action_checks_the_digest() -> None:
    digest = action_digest("issue_refund", {"amount": 80})
    a = approved_action(_task({"amount": 80}, digest), "approve")
    assert a.name == "issue_refund" and a.args == {"amount": 80}
    with pytest.raises(ActionDigestMismatch):
        approved_action(_task({"amount": 800}, digest))
    with pytest.raises(ActionNotApproved):
        approved_action(_task({"amount": 80}, digest, verdict="reject"), "approve")
    with pytest.raises(ActionNotApproved):
        approved_action(_task({"amount": 80}, digest, status="human_needed"))


def test_verify_receipt_vectors() -> None:
    v = json.loads((TESTDATA / "receipts" / "vectors.json").read_text(encoding="utf-8"))
    prev = None
    for r in v["receipts"]:
        claims = verify_receipt(r["receipt"], v["jwks"])
        assert claims.task_id == r["claims"]["task_id"] and claims.seq == r["claims"]["seq"]
        assert claims.action_digest == r["claims"]["action_digest"] and claims.prev == prev
        prev = r["hash"]
    assert len(v["invalid"]) >= 4
    for bad in v["invalid"]:
        with pytest.raises(ReceiptInvalid):
            verify_receipt(bad["receipt"], v["jwks"])
