"""Shared pieces of the benchmarks: a fresh database, the demo platform in its own
process, worker processes with their peak memory, and result files."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
BENCH_DB = os.environ.get("BENCH_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/bench")
BENCH_REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
# One audit chain key for the seeding process and the web and worker processes (REC-3).
os.environ.setdefault("AUDIT_CHAIN_KEY", "bench-audit-chain-key-" + "b" * 32)
# One key for secrets sealed at rest (OPS-3: TOTP seeds, platform tokens), for the same
# reason: else each process's instance folder generates its own.
os.environ.setdefault("SECRETS_KEY", "YmVuY2gtc2VjcmV0cy1rZXktc3Nzc3Nzc3Nzc3Nzc3M=")
OUT = ROOT / "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench_app(url: str = BENCH_DB):
    """The console app on the benchmark database (`url`: PostgreSQL, or an SQLite
    file, which is deleted first) and Redis, with the schema migrated fresh."""
    from flask_migrate import upgrade
    from sqlalchemy import create_engine, text

    (ROOT / "bench" / "out").mkdir(exist_ok=True)  # the benches' files (not in git)
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
    else:
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
        engine.dispose()
    from app import create_app

    app = create_app(
        {
            "SQLALCHEMY_DATABASE_URI": url,
            "REDIS_URL": BENCH_REDIS,
            "CONFIGURE_LOGGING": False,
            "EGRESS_ALLOW_PRIVATE": True,
            "PASSWORD_HASH_METHOD": "pbkdf2:sha256:1000",
            "INSTANCE_PATH": str(ROOT / "bench" / "out" / "instance"),
        }
    )
    with app.app_context():
        upgrade(directory=str(ROOT / "migrations"))
    import redis

    redis.Redis.from_url(BENCH_REDIS).flushdb()
    return app


@contextmanager
def demo_platform(port: int, env: dict | None = None):
    """The demo platform in its own process (so it does not share our GIL)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "app.demo_platform", "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_port(port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def wait_for_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def run_workers(args: list[list[str]], env: dict) -> tuple[float, float]:
    """Start worker processes, wait for all of them, return (seconds, peak RSS MB of any one)."""
    started = time.perf_counter()
    processes = [
        subprocess.Popen(a, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for a in args
    ]
    handles = [psutil.Process(p.pid) for p in processes]
    peak = 0
    while any(p.poll() is None for p in processes):
        for handle in handles:
            with suppress(psutil.NoSuchProcess):
                peak = max(peak, handle.memory_info().rss)
        time.sleep(0.1)
    elapsed = time.perf_counter() - started
    if any(p.returncode for p in processes):
        raise RuntimeError(f"a worker failed: {[p.returncode for p in processes]}")
    return elapsed, peak / 1024 / 1024


def stop_workers(workers: list[subprocess.Popen]) -> None:
    """SIGTERM each worker still running (a warm shutdown), kill any that has not
    ended 30 s later."""
    import signal

    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
    for worker in workers:
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


class CpuUse:
    """CPU seconds spent while a run lasted: by the worker processes it started and
    waited for (this process's reaped children), by the platform process, and by
    everything else on the machine (PostgreSQL, Redis, this process).

        with CpuUse(platform_pid) as cpu:
            run_workers(...)
        cpu.split  # {"workers": s, "platform": s, "other": s}
    """

    def __init__(self, platform_pid: int | None):
        self.platform = psutil.Process(platform_pid) if platform_pid else None
        self.split: dict[str, float] = {}

    def _now(self) -> tuple[float, float, float]:
        import resource

        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        machine = psutil.cpu_times()
        platform_cpu = sum(self.platform.cpu_times()[:2]) if self.platform else 0.0
        busy = machine.user + machine.system + getattr(machine, "nice", 0) + getattr(machine, "irq", 0)
        busy += getattr(machine, "softirq", 0)
        return children.ru_utime + children.ru_stime, platform_cpu, busy

    def __enter__(self) -> CpuUse:
        self._start = self._now()
        return self

    def __exit__(self, *exc) -> None:
        workers, platform_cpu, busy = (b - a for a, b in zip(self._start, self._now(), strict=True))
        self.split = {"workers": workers, "platform": platform_cpu, "other": max(0.0, busy - workers - platform_cpu)}


def platform_pid() -> int | None:
    """The pid of the demo platform this process started (see `demo_platform`)."""
    for child in psutil.Process().children():
        with suppress(psutil.Error):
            if "app.demo_platform" in " ".join(child.cmdline()):
                return child.pid
    return None


def machine() -> dict:
    return {
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def save(section: str, figures: dict) -> None:
    """Merge one benchmark's figures into bench/results.json."""
    path = OUT / "results.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(figures)
    data.setdefault("sections", {})[section] = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
    }
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def sign_in(get, post, email: str, password: str = "demo-password-1") -> None:
    """Sign a demo operator in through the login form, and its second step with the
    demo's TOTP seed when the account needs one (OPS-2). `get(path)` returns a page's
    text; `post(path, data)` returns the answer's Location header (no redirects
    followed)."""
    import re

    import pyotp

    from app.demo import demo_totp_seed

    def csrf(path: str) -> str:
        return re.search(r'value="([^"]+)"', get(path)).group(1)

    for _ in range(2):  # a code is accepted once (OPS-2): a sign-in within the same step waits for the next
        location = post("/login", {"email": email, "password": password, "csrf_token": csrf("/login")})
        if not location.endswith("/login/second-factor"):
            break
        code = pyotp.TOTP(demo_totp_seed(email)).now()
        location = post("/login/second-factor", {"code": code, "csrf_token": csrf("/login/second-factor")})
        if location:
            break
        time.sleep(30 - time.time() % 30 + 0.1)
    signed_in = location and not location.split("?")[0].endswith(("/login", "/login/second-factor", "/login/enrol"))
    assert signed_in, f"{email} was not signed in (the last answer led to {location!r})"
