"""Fixtures: one real server for the whole run, accounts, a reviewer."""

from __future__ import annotations

import secrets
from typing import Iterator

import pytest

from arbiterhq import Arbiter, Task

from harness import Reviewer, Server


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.stop()


class Account:
    """An account of the server: its owner's e-mail and an API key."""

    def __init__(self, server: Server) -> None:
        self.email = f"owner-{secrets.token_hex(4)}@example.com"
        self.key = server.new_account(self.email)
        self.server = server

    def client(self, **kw: object) -> Arbiter:
        return Arbiter(self.key, base_url=self.server.base_url, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def account(server: Server) -> Account:
    return Account(server)


@pytest.fixture()
def arbiter(account: Account) -> Iterator[Arbiter]:
    with account.client() as a:
        yield a


@pytest.fixture(scope="session")
def reviewer(server: Server, account: Account) -> Iterator[Reviewer]:
    r = Reviewer(server, account.email)
    yield r
    r.close()


@pytest.fixture(scope="session")
def expiring_task(account: Account) -> Task:
    """A task with the shortest deadline (60 s), made when the session
    starts so that the run's other tests pass the time it takes."""
    with account.client() as a:
        return a.tasks.create(prompt="Nobody will answer this.", allowed_verdicts=["yes", "no"], deadline_seconds=60)


@pytest.fixture(scope="session", autouse=True)
def _start_the_clock(request: pytest.FixtureRequest) -> None:
    # Only where a test of this run needs it, the expiring task is made first.
    if any("expiring_task" in getattr(item, "fixturenames", ()) for item in request.session.items):
        request.getfixturevalue("expiring_task")
