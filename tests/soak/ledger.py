"""The ledger: what each role instance wrote down as it ran, one JSON line per
record, one file per instance, and a dataclass for each kind of record.

On disk a record is compact (`{"k": "claim", "q": "soak", "att": 2, ...}`), the
form tests/test_soak.py writes its hand-made ledgers in; each field below names
its short key, the one place those keys are spelled. A field left None is not
written.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar


def now() -> float:
    return round(time.time(), 4)


def brief(exc: BaseException) -> str:
    """An exception's text, short enough for a ledger line."""
    return str(exc)[:160]


def key(short: str, default: Any = None, factory: Any = MISSING) -> Any:
    """A field written under `short` in the ledger's JSON."""
    if factory is not MISSING:
        return field(default_factory=factory, metadata={"key": short})
    return field(default=default, metadata={"key": short})


@dataclass(kw_only=True)
class Record:
    """One line of a ledger; its `kind` is the line's `k`."""

    kind: ClassVar[str]
    source: str = key("src", "")  # the role instance that wrote it (its file's name), set on reading
    position: int = key("pos", 0)  # its line in that file, set on reading
    at: float | None = key("t")  # when it was written (the writer fills it in)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"k": self.kind}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and f.name not in ("source", "position"):
                out[f.metadata.get("key", f.name)] = value
        return out


@dataclass(kw_only=True)
class OnQueue(Record):
    """A record about one queue."""

    queue: str = key("q", "")


@dataclass(kw_only=True)
class OnJob(OnQueue):
    """A record about one job."""

    id: str = ""


@dataclass(kw_only=True)
class Span(Record):
    """A call: when it was sent and when it answered, or met the wire fault whose
    text is its `error`."""

    started: float = key("t0", 0.0)
    ended: float = key("t1", 0.0)
    error: str | None = key("err")


@dataclass(kw_only=True)
class Go(Record):
    """The harness let every role start."""

    kind = "go"


@dataclass(kw_only=True)
class Enqueue(OnJob, Span):
    """The producer enqueued a job: `reply` is the id the enqueue answered (another
    job's when a dedup key was taken)."""

    kind = "enq"
    group: str | None = key("g")
    dedup: str | None = key("d")
    delay_ms: int = key("delay", 0)
    reply: str | None = key("r")


@dataclass(kw_only=True)
class Claim(OnJob, Span):
    """A worker claimed a job, at its `attempt`, from the lanes when `grouped`."""

    kind = "claim"
    attempt: int = key("att", 0)
    grouped: bool = False


@dataclass(kw_only=True)
class HandlerRan(OnJob):
    """A worker's handler ran a job at its `attempt`."""

    attempt: int = key("att", 0)


@dataclass(kw_only=True)
class HandlerDone(HandlerRan):
    """A worker's handler succeeded; its complete comes next."""

    kind = "done"


@dataclass(kw_only=True)
class HandlerFailed(HandlerRan):
    """A worker's handler failed on purpose; its fail comes next."""

    kind = "handler_failed"


@dataclass(kw_only=True)
class Finish(OnJob, Span):
    """A worker's complete or fail (`how`): `outcome` is "ok", "refused" or "maybe"
    (a wire fault)."""

    kind = "finish"
    how: str = ""
    outcome: str = key("r", "")


@dataclass(kw_only=True)
class Trouble(Record):
    """What a role met and wrote down: the `error`'s text."""

    error: str = key("err", "")


@dataclass(kw_only=True)
class WireFault(Trouble):
    """A wire fault a worker met outside a complete or fail, and went on."""

    kind = "wire"
    where: str = ""


@dataclass(kw_only=True)
class Expiry(OnQueue, Span):
    """The housekeeper's expiry call that put `count` jobs back, or "maybe" when a
    wire fault cut it."""

    kind = "expired"
    count: int | str = key("n", 0)


@dataclass(kw_only=True)
class VerbCall(OnQueue, Span):
    """One operator verb, its invocation `number`, its keyword `args` and its
    `outcome`: "ok" (with its `reply`), "refused" (with the `reason`), "halted" (a
    watched trial stopped) or "maybe" (a wire fault)."""

    kind = "verb"
    verb: str = key("v", "")
    args: dict[str, Any] = key("a", factory=dict)
    number: int = key("n", 0)
    outcome: str = key("out", "")
    reply: Any = key("r")
    reason: str | None = None


@dataclass(kw_only=True)
class DrainStep(OnQueue):
    """The running `total` after a drain's `call`-th call; the drain is the verb of
    invocation number `drain`."""

    kind = "drain_step"
    drain: int = key("n", 0)
    call: int = 0
    total: int = 0


@dataclass(kw_only=True)
class KeysLeft(OnQueue):
    """The keys found under a queue after its obliterate answered "ok" (there must
    be none): their `count`, and the first `keys`."""

    kind = "obl_check"
    count: int = key("n", 0)
    keys: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class Crash(Trouble):
    """A role ended by an unexpected exception, or by itself."""

    kind = "crash"
    role: str = ""


@dataclass(kw_only=True)
class Fault(Record):
    """A fault the harness injected: its `fault` kind, what it hit, and (`at`) when."""

    kind = "fault"
    fault: str = key("f", "")
    worker: str | None = key("w")
    pid: int | None = None
    clients: int | None = None
    count: int | None = key("n")


@dataclass(kw_only=True)
class Straggler(Record):
    """A role process that did not stop at the end and was killed."""

    kind = "straggler"
    role: str = ""


KINDS: dict[str, type[Record]] = {
    c.kind: c
    for c in (
        Go,
        Enqueue,
        Claim,
        HandlerDone,
        HandlerFailed,
        Finish,
        WireFault,
        Expiry,
        VerbCall,
        DrainStep,
        KeysLeft,
        Crash,
        Fault,
        Straggler,
    )
}


def parse(line: dict[str, Any]) -> Record:
    """A record from its JSON object (its `src` and `pos` included when known)."""
    cls = KINDS[line["k"]]
    names = {f.metadata.get("key", f.name): f.name for f in fields(cls)}
    return cls(**{names[k]: v for k, v in line.items() if k != "k"})


class Ledger:
    """One role instance's file; each record is one `write` on an O_APPEND file, so
    a process killed mid-run leaves at most its last line cut."""

    def __init__(self, path: Path):
        self.name = path.stem
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, record: Record) -> None:
        if record.at is None:
            record.at = now()
        os.write(self.fd, (json.dumps(record.as_json(), default=str) + "\n").encode())


def read_ledgers(directory: Path) -> list[dict[str, Any]]:
    """Every line of every file, each with its `src` (the role instance) and its
    position in that file; a cut last line (a killed process) is skipped."""
    out = []
    for path in sorted(directory.glob("*.jsonl")):
        for i, text in enumerate(path.read_text().splitlines()):
            try:
                line = json.loads(text)
            except json.JSONDecodeError:
                continue
            line["src"], line["pos"] = path.stem, i
            out.append(line)
    return out
