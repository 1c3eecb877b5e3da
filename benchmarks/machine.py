"""The machine a benchmark ran on (printed first and kept in the final JSON line of every benchmark).

Import from a benchmark run as ``python benchmarks/NAME.py`` after putting the repository root on
``sys.path``: ``from benchmarks.machine import describe, machine``.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path


def cpu_model() -> str:
    """The CPU model name from ``/proc/cpuinfo`` (else :func:`platform.processor`, else ``unknown``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict[str, object]:
    """``{"platform", "cpu", "cores", "python"}``: OS/platform string, CPU model, logical cores, Python version."""
    return {"platform": platform.platform(), "cpu": cpu_model(), "cores": os.cpu_count(),
            "python": platform.python_version()}


def describe() -> str:
    """One line: ``<platform>; <cpu>; <cores> cores; Python <version>``."""
    info = machine()
    return f"{info['platform']}; {info['cpu']}; {info['cores']} cores; Python {info['python']}"


def process_usage(pid: int) -> tuple[float, float, float]:
    """``(RSS MB, peak RSS MB, CPU seconds)`` of a running process, from ``/proc`` (Linux).

    Raises:
        OSError: no such process (it ended; ``ProcessLookupError`` for one that ended and is not
            reaped yet -- a zombie has no memory to report).
    """
    status = Path(f"/proc/{pid}/status").read_text()
    fields = {k: v for k, _, v in (line.partition(":") for line in status.splitlines())}
    if "VmRSS" not in fields:
        raise ProcessLookupError(f"process {pid} has ended ({fields.get('State', '?').strip()})")
    rss = int(fields["VmRSS"].split()[0]) / 1024
    hwm = int(fields["VmHWM"].split()[0]) / 1024
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return rss, hwm, (int(stat[11]) + int(stat[12])) / ticks  # utime + stime


def cpu_by_process() -> dict[int, tuple[str, float]]:
    """Every process's ``(command line, CPU seconds so far)`` by pid, from ``/proc`` (those that end
    while it reads are left out): two of these around a run say what else used the machine."""
    ticks = os.sysconf("SC_CLK_TCK")
    out: dict[int, tuple[str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, IndexError):
            continue
        out[int(entry.name)] = (cmd[:120] or entry.name, (int(stat[11]) + int(stat[12])) / ticks)
    return out


def others_busy(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], ours: set[int],
                top: int = 6) -> list[dict[str, object]]:
    """The ``top`` processes outside ``ours`` by CPU seconds between two :func:`cpu_by_process`."""
    used = [(after[pid][1] - before.get(pid, ("", 0.0))[1], after[pid][0]) for pid in after if pid not in ours]
    return [{"cmd": cmd, "cpu_s": round(cpu, 1)} for cpu, cmd in sorted(used, reverse=True)[:top] if cpu >= 0.5]


def speed_probe(repeat: int = 3) -> float:
    """Seconds of a fixed single-threaded pure-Python workload (sorting, a dict, float arithmetic;
    0.07-0.09 s on the 2-core AMD EPYC development VM in a fast stretch), the least of ``repeat`` runs.

    A shared VM's speed wanders by a third from minute to minute; a benchmark prints this beside its
    figures (before and after its runs) so figures of different minutes can be compared: a report
    of 10 s beside a probe of 0.09 s is the report of 7.8 s beside a probe of 0.07 s."""
    import time

    best = float("inf")
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        data = [(i * 7919) % 100_003 for i in range(200_000)]
        data.sort()
        table: dict[int, float] = {}
        for i, v in enumerate(data):
            table[v] = table.get(v, 0.0) + i * 0.5
        sum(table.values())
        best = min(best, time.perf_counter() - t0)
    return best


def start_profiler(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    """py-spy sampling ``pid`` into ``out`` (collapsed stacks) until stopped; ``None`` without py-spy."""
    spy = shutil.which("py-spy") or (str(Path(sys.executable).parent / "py-spy")
                                     if (Path(sys.executable).parent / "py-spy").exists() else None)
    if spy is None:
        print("--profile: py-spy is not installed (pip install py-spy); not profiling", flush=True)
        return None
    return subprocess.Popen([spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "200", "--nonblocking",
                             "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def print_profile(path: Path, top: int = 20) -> None:
    """The functions where the profiled process spent its samples: own samples and with callees."""
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = [f for f in stack.split(";") if f]
        if not frames:
            continue
        samples += n
        own[frames[-1]] = own.get(frames[-1], 0) + n
        for frame in set(frames):
            total[frame] = total.get(frame, 0) + n
    print(f"{samples} samples", flush=True)
    for frame, n in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {100 * n / samples:5.1f} % own  {100 * total[frame] / samples:5.1f} % total  {frame[:150]}")


def checkout(repo: Path, ref: str, into: Path) -> Path:
    """The tree of commit ``ref`` of the git repository ``repo`` written into ``into`` (``git archive``):
    the code a benchmark runs as its "before" anchor.

    Raises:
        subprocess.CalledProcessError: ``ref`` is no commit of ``repo`` (its ``stderr`` says why).
    """
    archive = subprocess.run(["git", "-C", str(repo), "archive", ref], check=True, capture_output=True).stdout
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into
