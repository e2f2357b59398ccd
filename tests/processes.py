"""Processes a test starts: find them, and wait for them to exit without polling."""

from __future__ import annotations

import os
import select
import time
from pathlib import Path


def children_of(pid: int) -> list[int]:
    """Processes (a zombie too) whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # gone
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def last_pid() -> int:
    """The pid the kernel gave last (to any process on the machine)."""
    return int(Path("/proc/loadavg").read_text().split()[-1])


def processes_marked(name: str, value: str, since_pid: int = 0) -> list[int]:
    """Live processes whose environment has `name`=`value` (they inherited it).

    Args:
        since_pid: `last_pid()` before they started: older pids are not read (each
            read costs; unless pids wrapped around meanwhile).
    """
    marker = f"{name}={value}".encode()
    if last_pid() < since_pid:  # pids wrapped around
        since_pid = 0
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) <= since_pid or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0") and alive(int(entry.name)):
                found.append(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
    return found


def command_of(pid: int) -> str:
    """The command line of `pid` ("?" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def wait_for_exit(pids, timeout: float) -> set[int]:
    """Wait until every process of `pids` has exited, at most `timeout` seconds.

    Waits on each process's pidfd, which the kernel makes readable at its exit (an
    event, not a poll); a zombie counts as exited.

    Returns:
        The pids still running at the deadline (empty when all exited).
    """
    deadline = time.monotonic() + timeout
    left = set()
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:  # already gone
            continue
        try:
            if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                left.add(pid)
        finally:
            os.close(fd)
    return left


def eventually(check, timeout: float = 60, what: str = "the condition", interval: float = 0.1):
    """Wait until `check()` returns something true, and return it.

    The one polling wait of the suite: for what another process brings about (a
    row a worker commits, a key in Redis, a port that opens), which sends this one
    no event. Within a process, wait on an event instead.

    Raises:
        AssertionError: when `check` is still false after `timeout` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
