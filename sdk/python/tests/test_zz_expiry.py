"""Expiry, last: the task was made when the run started (conftest)."""

from __future__ import annotations

import arbiterhq
from arbiterhq import Arbiter, Task


def test_wait_returns_an_expired_task(arbiter: Arbiter, expiring_task: Task) -> None:
    done = arbiter.tasks.wait(expiring_task.id, timeout=120)
    assert done.status == arbiterhq.EXPIRED
    assert done.final
    assert done.final_verdict is None and done.final_tier is None
    assert done.expired_at is not None and done.expired_at >= expiring_task.created_at + 60
