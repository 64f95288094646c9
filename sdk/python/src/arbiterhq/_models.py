"""The API's objects as dataclasses. Fields a later server adds are kept in
``extra`` and otherwise ignored, as the API's versioning asks of clients."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, Optional

# Task statuses. A task is final when it is completed or expired; clients
# must tolerate statuses added later.
PENDING = "pending"
AGENT_RUNNING = "agent_running"
HUMAN_NEEDED = "human_needed"
COMPLETED = "completed"
EXPIRED = "expired"
FINAL_STATUSES = frozenset({COMPLETED, EXPIRED})

# Who decided a completed task.
TIER_AGENT = "agent"
TIER_HUMAN = "human"
# TIER_FALLBACK: the task's on-expiry outcome decided it when its deadline passed.
TIER_FALLBACK = "fallback"


def _opt_float(v: Any) -> Optional[float]:
    return None if v is None else float(v)


def _opt_str(v: Any) -> Optional[str]:
    return None if v is None else str(v)


_ATTEMPT_FIELDS: FrozenSet[str] = frozenset(
    {"tier", "verdict", "confidence", "rationale", "model", "reviewer",
     "error", "started_at", "finished_at", "audit"}
)
_TASK_FIELDS: FrozenSet[str] = frozenset(
    {"id", "status", "task_type", "source", "touchpoint", "prompt",
     "allowed_verdicts", "confidence_threshold", "final_verdict",
     "final_tier", "final_confidence", "created_at", "completed_at",
     "deadline_at", "expired_at", "attempts", "gold_verdict"}
)


def _extra(data: Mapping[str, Any], known: FrozenSet[str]) -> Dict[str, Any]:
    return {k: v for k, v in data.items() if k not in known}


@dataclass(frozen=True)
class Attempt:
    """One verifier call or one person's decision on a task."""

    tier: str
    verdict: Optional[str]
    confidence: Optional[float]
    rationale: str
    model: Optional[str]
    reviewer: Optional[str]
    error: Optional[str]
    started_at: float
    finished_at: Optional[float]
    audit: bool = False
    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Attempt":
        """Reads an attempt as the API sends it."""
        return cls(
            tier=str(d["tier"]),
            verdict=_opt_str(d.get("verdict")),
            confidence=_opt_float(d.get("confidence")),
            rationale=str(d.get("rationale") or ""),
            model=_opt_str(d.get("model")),
            reviewer=_opt_str(d.get("reviewer")),
            error=_opt_str(d.get("error")),
            started_at=float(d["started_at"]),
            finished_at=_opt_float(d.get("finished_at")),
            audit=bool(d.get("audit", False)),
            extra=_extra(d, _ATTEMPT_FIELDS),
        )


@dataclass(frozen=True)
class Task:
    """A verification task as the API answers it. ``final_*`` and
    ``completed_at`` are None until it is completed; ``expired_at`` is set
    when its deadline passed first."""

    id: str
    status: str
    task_type: str
    source: str
    touchpoint: str
    prompt: str
    allowed_verdicts: List[str]
    confidence_threshold: float
    final_verdict: Optional[str]
    final_tier: Optional[str]
    final_confidence: Optional[float]
    created_at: float
    completed_at: Optional[float]
    deadline_at: Optional[float]
    expired_at: Optional[float]
    attempts: List[Attempt]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    #: A gold task's known answer; only the account's own reads
    #: (get_task, list_tasks) carry it, None elsewhere.
    gold_verdict: Optional[str] = None

    @property
    def final(self) -> bool:
        """Whether the task is in a final state (completed or expired)."""
        return self.status in FINAL_STATUSES

    @property
    def rationale(self) -> str:
        """The reason given with the deciding answer ("" when none): the
        rationale of the last attempt that gave the final verdict."""
        if self.final_verdict is None:
            return ""
        for a in reversed(self.attempts):
            if not a.audit and a.verdict == self.final_verdict and a.tier == self.final_tier:
                return a.rationale
        return ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Task":
        """Reads a task as the API sends it."""
        return cls(
            id=str(d["id"]),
            status=str(d["status"]),
            task_type=str(d.get("task_type", "")),
            source=str(d.get("source", "")),
            touchpoint=str(d.get("touchpoint", "")),
            prompt=str(d.get("prompt", "")),
            allowed_verdicts=[str(v) for v in d.get("allowed_verdicts", [])],
            confidence_threshold=float(d.get("confidence_threshold", 0)),
            final_verdict=_opt_str(d.get("final_verdict")),
            final_tier=_opt_str(d.get("final_tier")),
            final_confidence=_opt_float(d.get("final_confidence")),
            created_at=float(d["created_at"]),
            completed_at=_opt_float(d.get("completed_at")),
            deadline_at=_opt_float(d.get("deadline_at")),
            expired_at=_opt_float(d.get("expired_at")),
            attempts=[Attempt.from_dict(a) for a in d.get("attempts") or []],
            extra=_extra(d, _TASK_FIELDS),
            gold_verdict=_opt_str(d.get("gold_verdict")),
        )


@dataclass(frozen=True)
class TaskResult:
    """The outcome of one task of a batch: ``task`` when it was created (or
    replayed), else ``error``. ``status`` is the item's HTTP-like status."""

    status: int
    task: Optional[Task] = None
    replayed: bool = False
    error: Optional[Exception] = None

    @property
    def ok(self) -> bool:
        """Whether the task was created or replayed."""
        return self.task is not None
