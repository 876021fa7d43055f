"""A recorded /proc with per-core counters, processors and procs_running, for replay tests."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

BOOT = 1_700_000_000
HZ = 100
_PF_KTHREAD = 0x00200000


@dataclass
class Task:
    pid: int
    ppid: int = 1
    uid: int = 1000
    name: str = "job"
    state: str = "S"
    start: int = 100  # ticks since boot
    utime: int = 0
    cutime: int = 0
    processor: int = 0
    kernel: bool = False
    environ: tuple[str, ...] = ("PATH=/bin",)


@dataclass
class CoreProc:
    """``cores`` maps core id -> [user, nice, system, idle, iowait, irq, softirq, steal] ticks."""

    root: Path
    cores: dict[int, list[int]] = field(default_factory=dict)
    tasks: dict[int, Task] = field(default_factory=dict)
    procs_running: int = 1

    def add(self, pid: int, **fields) -> Task:
        self.tasks[pid] = Task(pid, **fields)
        return self.tasks[pid]

    def write(self) -> None:
        for entry in self.root.iterdir():
            if entry.name.isdigit():
                shutil.rmtree(entry)
        total = [sum(values) for values in zip(*self.cores.values())] or [0] * 8
        lines = ["cpu  " + " ".join(map(str, total)) + " 0 0"]
        lines += [f"cpu{core} " + " ".join(map(str, values)) + " 0 0"
                  for core, values in sorted(self.cores.items())]
        lines += ["intr 0", f"btime {BOOT}", "processes 1000",
                  f"procs_running {self.procs_running}", "procs_blocked 0"]
        (self.root / "stat").write_text("\n".join(lines) + "\n")
        for t in self.tasks.values():
            base = self.root / str(t.pid)
            base.mkdir()
            flags = _PF_KTHREAD if t.kernel else 0x400000
            # fields 3..52 of /proc/PID/stat; processor is field 39
            rest = [t.state, t.ppid, 1, 1, 0, -1, flags, 0, 0, 0, 0, t.utime, 0, t.cutime, 0,
                    20, 0, 1, 0, t.start, 0, 0] + [0] * 13 + [17, t.processor] + [0] * 13
            (base / "stat").write_text(f"{t.pid} ({t.name}) " + " ".join(map(str, rest)) + "\n")
            (base / "status").write_text(f"Name:\t{t.name}\nUid:\t{t.uid}\t{t.uid}\t0\t0\n")
            (base / "cgroup").write_text("0::/user.slice\n")
            (base / "environ").write_bytes(b"\0".join(e.encode() for e in t.environ) + b"\0")
