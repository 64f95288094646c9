"""Where the framework adapters keep what they need to resume a run once:
which run and which pause a task answers, and whether it was resumed."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Protocol

from ._base import COMPLETED
from ._models import Task


class ResumeStore(Protocol):
    """The caller's small store behind an adapter. In production it is a
    table of the application's database, for example::

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


@dataclass(frozen=True)
class Decision:
    """Arbiter's answer to a paused run: the verdict (None when the task
    expired first), who decided and their reason."""

    task_id: str
    status: str
    verdict: Optional[str]
    tier: Optional[str]
    rationale: str

    @classmethod
    def from_task(cls, task: Task) -> "Decision":
        """The decision a final task holds."""
        return cls(task.id, task.status, task.final_verdict, task.final_tier, task.rationale)

    @property
    def decided(self) -> bool:
        """Whether a verdict was given (not expired)."""
        return self.status == COMPLETED and self.verdict is not None

    def as_dict(self) -> Dict[str, Any]:
        """The decision as plain data, as a resumed node receives it."""
        return {"task_id": self.task_id, "status": self.status, "verdict": self.verdict,
                "tier": self.tier, "rationale": self.rationale}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Decision":
        """Reads as_dict's form back."""
        return cls(str(d["task_id"]), str(d["status"]), d.get("verdict"), d.get("tier"), str(d.get("rationale") or ""))
