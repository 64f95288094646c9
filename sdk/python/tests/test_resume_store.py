"""SQLResumeStore on SQLite and on Postgres (ARBITER_TEST_DATABASE_URL):
a row per task, a ref that stays the first one, one claim that wins among
many processes' connections, and the LangGraph adapter resuming a run once
across two bridges that share nothing but the table."""

from __future__ import annotations

import os
import secrets
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, List, Tuple

import pytest

import arbiterhq
from arbiterhq import SQLResumeStore

from conftest import Account
from harness import Reviewer, wait_for

PG_URL = os.environ.get("ARBITER_TEST_DATABASE_URL", "")


def _sqlite(tmp_path: Path) -> Tuple[Callable[[], Any], str, Callable[[], None]]:
    path = tmp_path / "app.db"
    return (lambda: sqlite3.connect(path, timeout=30)), "sqlite", (lambda: None)


def _postgres(table: str) -> Tuple[Callable[[], Any], str, Callable[[], None]]:
    if not PG_URL:
        if os.environ.get("ARBITER_TEST_REQUIRE_POSTGRES") == "1":
            pytest.fail("ARBITER_TEST_REQUIRE_POSTGRES=1 but ARBITER_TEST_DATABASE_URL is unset")
        pytest.skip("ARBITER_TEST_DATABASE_URL names no Postgres")
    psycopg = pytest.importorskip("psycopg")

    def drop() -> None:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")

    return (lambda: psycopg.connect(PG_URL)), "postgres", drop


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Tuple[Callable[[], Any], str, str]]:
    table = "arbiter_resumes_" + secrets.token_hex(4)
    connect, dialect, drop = _sqlite(tmp_path) if request.param == "sqlite" else _postgres(table)
    try:
        yield connect, dialect, table
    finally:
        drop()


def test_a_task_is_remembered_once_and_claimed_once(database: Tuple[Callable[[], Any], str, str]) -> None:
    connect, dialect, table = database
    store = SQLResumeStore(connect, dialect=dialect, table=table)
    assert store.recall("tsk_0000000000000001") is None
    assert not store.claim("tsk_0000000000000001"), "a task never remembered is nobody's to resume"
    store.remember("tsk_0000000000000001", {"thread_id": "t-1", "interrupt_id": "i-1"})
    store.remember("tsk_0000000000000001", {"thread_id": "t-2", "interrupt_id": "i-2"})
    assert store.recall("tsk_0000000000000001") == {"thread_id": "t-1", "interrupt_id": "i-1"}
    # A second store over the same table, as a restarted process has.
    again = SQLResumeStore(connect, dialect=dialect, table=table)
    assert again.recall("tsk_0000000000000001") == {"thread_id": "t-1", "interrupt_id": "i-1"}
    assert again.claim("tsk_0000000000000001")
    assert not store.claim("tsk_0000000000000001")
    assert not again.claim("tsk_0000000000000001")


def test_of_many_concurrent_claims_one_wins(database: Tuple[Callable[[], Any], str, str]) -> None:
    connect, dialect, table = database
    store = SQLResumeStore(connect, dialect=dialect, table=table)
    ids = [f"tsk_{i:016x}" for i in range(5)]
    for task_id in ids:
        store.remember(task_id, {"run_id": "r", "call_id": task_id})
    wins: List[str] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def claimer() -> None:
        mine = SQLResumeStore(connect, dialect=dialect, table=table, create=False)
        start.wait()
        for task_id in ids:
            if mine.claim(task_id):
                with lock:
                    wins.append(task_id)

    threads = [threading.Thread(target=claimer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(wins) == ids


def test_it_refuses_what_is_not_a_table_or_dialect(tmp_path: Path) -> None:
    connect, _, _ = _sqlite(tmp_path)
    with pytest.raises(ValueError):
        SQLResumeStore(connect, table="resumes; DROP TABLE users")
    with pytest.raises(ValueError):
        SQLResumeStore(connect, dialect="oracle")
    assert "CREATE TABLE IF NOT EXISTS app.resumes" in SQLResumeStore(connect, table="app.resumes", create=False).create_table_sql()


def test_langgraph_resumes_once_through_the_sql_store(
    database: Tuple[Callable[[], Any], str, str], account: Account, reviewer: Reviewer,
) -> None:
    pytest.importorskip("langgraph")
    from arbiterhq.langgraph import LangGraphBridge

    from test_langgraph import Shop, _config, _pause

    connect, dialect, table = database
    shop, config = Shop(), _config()
    _pause(shop, config)
    first = LangGraphBridge(account.client(), SQLResumeStore(connect, dialect=dialect, table=table))
    (task,) = first.submit(shop.graph, config)
    # Another process: its own client and store object, the same table.
    second = LangGraphBridge(account.client(), SQLResumeStore(connect, dialect=dialect, table=table, create=False))
    (again,) = second.submit(shop.graph, config)
    assert again.id == task.id

    wait_for(lambda: first.arbiter.tasks.get(task.id).status == arbiterhq.HUMAN_NEEDED, "the task to reach a person")
    reviewer.decide(task.id, "approve", "Receipt checked.")
    decided = first.arbiter.tasks.wait(task.id, timeout=60)
    results: List[Any] = []
    both = threading.Barrier(2)

    def resume(bridge: LangGraphBridge) -> None:
        both.wait()
        results.append(bridge.resume(shop.graph, decided))

    threads = [threading.Thread(target=resume, args=(b,)) for b in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(shop.refunds) == 1, shop.refunds
    assert sum(r is not None for r in results) == 1
    assert first.resume(shop.graph, decided) is None
