"""Where the framework adapters keep what they need to resume a run once:
which run and which pause a task answers, and whether it was resumed."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Protocol

from ._base import COMPLETED
from ._models import Task


class ResumeStore(Protocol):
    """The caller's small store behind an adapter. In production it is a
    table of the application's database (SQLResumeStore is one, for SQLite
    and Postgres), for example::

        CREATE TABLE arbiter_resumes (
            task_id    text PRIMARY KEY,
            ref        jsonb NOT NULL,
            resumed_at timestamptz
        );

    ``remember`` inserts the row (``ON CONFLICT DO NOTHING``), ``recall``
    reads ``ref``, and ``claim`` is ``UPDATE arbiter_resumes SET resumed_at
    = now() WHERE task_id = $1 AND resumed_at IS NULL``, true when it
    changed a row: of any number of processes handed the same decision
    (a retried webhook, a wait racing a webhook), one resumes the run."""

    def remember(self, task_id: str, ref: Mapping[str, Any]) -> None:
        """Records which run and which pause the task answers."""

    def recall(self, task_id: str) -> Optional[Dict[str, Any]]:
        """What remember recorded for the task, or None."""

    def claim(self, task_id: str) -> bool:
        """True for the first caller only: that caller resumes the run."""


class MemoryResumeStore:
    """A ResumeStore in this process's memory, for tests and for a single
    process that may lose its runs when it stops."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refs: Dict[str, Dict[str, Any]] = {}
        self._claimed: Dict[str, bool] = {}

    def remember(self, task_id: str, ref: Mapping[str, Any]) -> None:
        with self._lock:
            self._refs.setdefault(task_id, dict(ref))

    def recall(self, task_id: str) -> Optional[Dict[str, Any]]:
        with self._lock:
            ref = self._refs.get(task_id)
            return None if ref is None else dict(ref)

    def claim(self, task_id: str) -> bool:
        with self._lock:
            if self._claimed.get(task_id):
                return False
            self._claimed[task_id] = True
            return True


# The dialects SQLResumeStore speaks: the parameter marker, the type of
# the ref column and of the times.
_DIALECTS: Dict[str, Dict[str, str]] = {
    "sqlite": {"p": "?", "ref": "TEXT", "ref_value": "?", "time": "TEXT"},
    "postgres": {"p": "%s", "ref": "jsonb", "ref_value": "CAST(%s AS jsonb)", "time": "timestamptz"},
}


class SQLResumeStore:
    """A ResumeStore in a table of the application's database: SQLite
    (the standard library's sqlite3) or Postgres (psycopg 3, or another
    DB-API driver whose parameter marker is %s). Any number of processes
    may share it: ``remember`` inserts a row unless the task has one,
    ``recall`` reads it, and ``claim`` is a conditional update whose row
    count says which one caller resumes the run.

    ``connect`` returns a new DB-API connection (``lambda:
    sqlite3.connect(path)``, ``lambda: psycopg.connect(url)``, or a pool's);
    each call opens one, commits and closes it. ``table`` is created when
    missing unless ``create`` is False (make it in your migrations then:
    ``create_table_sql()`` is its statement)."""

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        dialect: str = "sqlite",
        table: str = "arbiter_resumes",
        create: bool = True,
    ) -> None:
        if dialect not in _DIALECTS:
            raise ValueError(f"dialect must be one of {sorted(_DIALECTS)}, not {dialect!r}")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?", table):
            raise ValueError(f"not a table name: {table!r}")
        self._connect = connect
        self._d = _DIALECTS[dialect]
        self.table = table
        if create:
            self._run(self.create_table_sql(), ())

    def create_table_sql(self) -> str:
        """The statement that makes the table."""
        d = self._d
        return (f"CREATE TABLE IF NOT EXISTS {self.table} (task_id TEXT PRIMARY KEY, ref {d['ref']} NOT NULL, "
                f"resumed_at {d['time']})")

    def _run(self, sql: str, params: Any) -> Any:
        conn = self._connect()
        try:
            cur = conn.cursor()
            cur.execute(sql, params)
            got = (cur.rowcount, cur.fetchone() if sql.lstrip().upper().startswith("SELECT") else None)
            conn.commit()
            return got
        except BaseException:
            conn.rollback()
            raise
        finally:
            conn.close()

    def remember(self, task_id: str, ref: Mapping[str, Any]) -> None:
        d = self._d
        self._run(f"INSERT INTO {self.table} (task_id, ref) VALUES ({d['p']}, {d['ref_value']}) "
                  "ON CONFLICT (task_id) DO NOTHING", (task_id, json.dumps(dict(ref))))

    def recall(self, task_id: str) -> Optional[Dict[str, Any]]:
        _, row = self._run(f"SELECT ref FROM {self.table} WHERE task_id = {self._d['p']}", (task_id,))
        if row is None:
            return None
        ref = row[0]
        return dict(json.loads(ref) if isinstance(ref, (str, bytes)) else ref)

    def claim(self, task_id: str) -> bool:
        p = self._d["p"]
        rowcount, _ = self._run(f"UPDATE {self.table} SET resumed_at = CURRENT_TIMESTAMP "
                                f"WHERE task_id = {p} AND resumed_at IS NULL", (task_id,))
        return bool(rowcount == 1)


@dataclass(frozen=True)
class Decision:
    """Arbiter's answer to a paused run: the verdict (None when the task
    expired first), who decided and their reason, and, for a task that
    asked about an action, the action the decision approved (as a reviewer
    may have edited it): ``type`` is ``"edit"`` then, as LangGraph's
    human-in-the-loop decisions say it, ``"approve"`` or ``"reject"``
    otherwise."""

    task_id: str
    status: str
    verdict: Optional[str]
    tier: Optional[str]
    rationale: str
    #: The approved action as the task answered it ({name, args, digest,
    #: proposed_digest, edited}); None without one. Run it through
    #: approved_args, which checks it.
    action: Optional[Dict[str, Any]] = None

    @classmethod
    def from_task(cls, task: Task) -> "Decision":
        """The decision a final task holds."""
        a = task.approved_action
        action = None if a is None else {"name": a.name, "args": dict(a.args), "digest": a.digest,
                                         "proposed_digest": a.proposed_digest, "edited": a.edited}
        return cls(task.id, task.status, task.final_verdict, task.final_tier, task.rationale, action)

    @property
    def decided(self) -> bool:
        """Whether a verdict was given (not expired)."""
        return self.status == COMPLETED and self.verdict is not None

    def type(self, allow: str = "approve") -> str:
        """``"edit"`` when the allowing verdict came with a reviewer's edit
        of the action, ``"approve"`` with it unedited, ``"reject"``
        otherwise (another verdict, or none)."""
        if not self.decided or self.verdict != allow:
            return "reject"
        return "edit" if self.action is not None and self.action.get("edited") else "approve"

    def approved_args(self, name: str, args: Mapping[str, Any], allow: str = "approve") -> Dict[str, Any]:
        """The arguments to run ``name`` with: the approved action's, with a
        reviewer's edits, once checked. The call ``name(args)`` must be the
        one asked about (its digest the proposal's) and the approved
        action's digest its own. Raises ActionNotApproved when the
        decision approves no action, and ActionDigestMismatch when either
        digest does not match: then nothing must run."""
        from ._integrity import ActionDigestMismatch, ActionNotApproved, action_digest

        a = self.action
        if self.type(allow) == "reject" or a is None:
            raise ActionNotApproved(f"task {self.task_id} approved no action ({self.verdict})")
        try:
            approved = action_digest(str(a["name"]), a["args"])
            called = action_digest(name, args)
        except ValueError as e:
            raise ActionDigestMismatch(f"an action of task {self.task_id} has no canonical form: {e}") from e
        if approved != a["digest"]:
            raise ActionDigestMismatch(f"the approved action of task {self.task_id} is not the one its digest names")
        if name != a["name"] or called != a["proposed_digest"]:
            raise ActionDigestMismatch(f"the call of {name} is not the one task {self.task_id} asked about: its arguments changed")
        return dict(a["args"])

    def as_dict(self) -> Dict[str, Any]:
        """The decision as plain data, as a resumed node receives it."""
        d: Dict[str, Any] = {"task_id": self.task_id, "status": self.status, "verdict": self.verdict,
                             "tier": self.tier, "rationale": self.rationale}
        if self.action is not None:
            d["action"] = dict(self.action)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Decision":
        """Reads as_dict's form back."""
        action = d.get("action")
        return cls(str(d["task_id"]), str(d["status"]), d.get("verdict"), d.get("tier"), str(d.get("rationale") or ""),
                   dict(action) if isinstance(action, Mapping) else None)
