"""Write bench/RESULTS.md from bench/results.json: every figure against its target."""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent

TARGETS = [
    ("delivery_ratio", "Delivery throughput / plain RQ jobs", ">= 0.6", lambda v: v >= 0.6),
    (
        "delivery_ratio_minimal",
        "Delivery throughput / minimal correct delivery",
        ">= 0.7",
        lambda v: v >= 0.7,
    ),
    # issue 25: each console page against the bare route of its size, same run, p50 and p95
    *(
        (f"{page}_{q}_ratio", f"{title} {q} / bare route {q}", "<= 2", lambda v: v <= 2)
        for page, title in (
            ("detail", "Proposal page (50 attempts, 200 audit rows)"),
            ("task", "Approval tasks page"),
            ("queue", "Queue at a million reports (`queue_reports`)"),
            ("list", "Proposals list"),
        )
        for q in ("p50", "p95")
    ),
    # no target: the floor every page starts from (a signed-in page with nothing in it)
    ("floor_p50_ratio", "Signed-in empty page p50 / bare route p50 (the floor)", "—", lambda v: True),
    ("floor_p95_ratio", "Signed-in empty page p95 / bare route p95 (the floor)", "—", lambda v: True),
    ("deep_page_ratio", "Page 1,000 / first page (1M rows)", "<= 1.5", lambda v: v <= 1.5),
    ("sweep_uses_index", "Due-delivery sweep uses an index", "true", lambda v: v is True),
    ("worker_peak_rss_mb", "Worker peak RSS (MB)", "<= 150", lambda v: v <= 150),
    # CONN-1: requests a 30 s outage receives with the breaker ("a handful": the failures that
    # open it, the requests already in flight, the probes), and recovery to all applied
    ("outage_requests_during_outage", "Requests during a 30 s outage, with the breaker", "<= 20", lambda v: v <= 20),
    ("outage_recovery_seconds", "Platform recovery to all applied (s)", "—", lambda v: True),
    # BULK (issue 24): a 10,000-item batch
    ("bulk_dry_run_seconds", "Dry run of 10,000 pasted subjects (s)", "<= 10", lambda v: v <= 10),
    ("bulk_proposals_per_second", "Proposals created per second by a batch's submission", ">= 1000", lambda v: v >= 1000),
    ("bulk_single_proposals_per_second", "Single proposals prepared per second (baseline)", "—", lambda v: True),
    (
        "bulk_delivery_ratio",
        "(10,000 / R) / seconds from approval to all applied, R = 200/s, a platform allowing R/s",
        ">= 0.87 (1 / 1.15)",
        lambda v: v >= 1 / 1.15,
    ),
    (
        "bulk_429_exactly_once",
        "A second batch with 429s injected on 10 % of requests: each item applied once per Idempotency-Key",
        "true",
        lambda v: v is True,
    ),
    ("bulk_page_ratio", "Batch page read model p50 / bare SELECT p50 (10,000 items)", "<= 2", lambda v: v <= 2),
    # CONN-1, issue 24: held deliveries flow at the full rate once the breaker closes —
    # (COUNT / the rate the same run sustains with no outage) / the recovery's seconds
    (
        "outage_recovery_ratio",
        "Outage recovery: COUNT at the sustained rate / recovery time",
        ">= 0.8",
        lambda v: v >= 0.8,
    ),
]


def main() -> None:
    data = json.loads((HERE / "results.json").read_text())
    lines = [
        "# Benchmark results",
        "",
        "Written by `bench/report.py` from `bench/results.json` (run everything with `bash bench/run`).",
        "",
        "| figure | measured | target | holds |",
        "|---|---|---|---|",
    ]
    for key, label, target, check in TARGETS:
        value = data.get(key)
        holds = "—" if value is None else ("yes" if check(value) else "**no**")
        lines.append(f"| {label} (`{key}`) | {value} | {target} | {holds} |")
    lines += (
        [
            "",
            "## Raw figures",
            "",
            "```json",
            json.dumps(
                {k: v for k, v in data.items() if k not in ("sections", "sweep_plan")}, indent=2, sort_keys=True
            ),
            "```",
            "",
            "## Sweep query plan (1M rows, 1,000 due)",
            "",
            "```",
        ]
        + data.get("sweep_plan", [])
        + ["```", ""]
    )
    sections = data.get("sections", {})
    if sections:
        lines += ["## Where and when", ""]
        for name, info in sorted(sections.items()):
            machine = info["machine"]
            lines.append(
                f"* {name}: {info['measured_at']}, {machine['cpus']} CPUs, {machine['memory_gb']} GB, "
                f"Python {machine['python']}, {machine['platform']}"
            )
    notes = HERE / "NOTES.md"
    if notes.exists():
        lines += ["", notes.read_text().strip(), ""]
    (HERE / "RESULTS.md").write_text("\n".join(lines) + "\n")
    print((HERE / "RESULTS.md").read_text())


if __name__ == "__main__":
    main()
