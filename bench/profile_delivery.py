"""Where one delivery's time goes: N bounded-automation proposals delivered in this
process, one after the other, under cProfile, with the SQL statements counted.

    cd bench && python profile_delivery.py 300 [sort]   # sort: cumulative (default) or tottime
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from collections import Counter

from common import demo_platform, free_port

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 300
SORT = sys.argv[2] if len(sys.argv) > 2 else "cumulative"


def main() -> None:
    import delivery as bench
    from sqlalchemy import event

    bench.COUNT = COUNT
    with demo_platform(free_port()) as platform_url:
        app = bench.bench_app()
        ids = bench.prepare(app, platform_url)
        from app.extensions import db
        from app.jobs import bind_app
        from app.services.lifecycle.dispatch import deliver

        bind_app(app)
        statements: Counter[str] = Counter()
        with app.app_context():
            event.listen(
                db.engine,
                "before_cursor_execute",
                lambda conn, cursor, sql, *rest: statements.update([sql.split(None, 1)[0].upper()]),
            )
            deliver(ids[0])  # warm: imports, pools, caches
            statements.clear()
            profile = cProfile.Profile()
            started = time.perf_counter()
            profile.enable()
            jobs = 0
            for proposal_id in ids[1:]:
                outcome = deliver(proposal_id)
                jobs += 1
                # a batch claim takes others along: their own calls then claim nothing
                for one in [outcome, *outcome.extra.get("batch", [])] if outcome.claimed else []:
                    assert one.state == "applied", one
            profile.disable()
            elapsed = time.perf_counter() - started
    n = len(ids) - 1
    print(f"{n} deliveries in {elapsed:.2f} s: {elapsed / n * 1000:.2f} ms each, one process ({jobs} jobs)")
    print("statements per delivery:", {k: round(v / n, 2) for k, v in statements.most_common()})
    print("total:", round(sum(statements.values()) / n, 2))
    pstats.Stats(profile).sort_stats(SORT).print_stats(45)


if __name__ == "__main__":
    main()
