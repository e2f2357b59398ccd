"""Where a console page's time goes: each page of bench/console.py requested N times
through Flask's test client in this process, with its SQL statements counted and
timed, its template rendering timed, and (with a page name) cProfile around it.

    cd bench && python profile_console.py [N] [REPORTS] [page] [sort]
    # page: detail, task, queue, list or empty (a signed-in page with nothing in it); sort: cumulative (default) or tottime
"""

from __future__ import annotations

import cProfile
import gc
import pstats
import re
import statistics
import sys
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 30
REPORTS = sys.argv[2] if len(sys.argv) > 2 else "20000"
PAGE = sys.argv[3] if len(sys.argv) > 3 else None
SORT = sys.argv[4] if len(sys.argv) > 4 else "cumulative"


def main() -> None:
    sys.argv = [sys.argv[0], "1", REPORTS]  # console.py reads its sizes from argv
    import console as bench
    from flask import template_rendered
    from sqlalchemy import event

    from app.extensions import db

    app = bench.bench_app(bench.DB)
    proposal_id = bench.seed(app)
    gc.collect()
    gc.freeze()  # as gunicorn.conf.py's post_worker_init does in each web process
    client = app.test_client()
    bench.sign_in(lambda path: client.get(path).text,
                  lambda path, data: client.post(path, data=data).headers.get("Location", ""),
                  "bench-reviewer@example.com")
    pages = {"detail": f"/proposals/{proposal_id}", "task": "/tasks", "queue": "/queue", "list": "/proposals",
             "empty": "/appeals"}  # empty: the fixed cost of a signed-in page
    sql = {"n": 0, "ms": 0.0}

    def before(conn, cursor, statement, params, context, many):
        conn.info["started"] = time.perf_counter()

    def after(conn, cursor, statement, params, context, many):
        sql["n"] += 1
        sql["ms"] += (time.perf_counter() - conn.info["started"]) * 1000

    with app.app_context():
        event.listen(db.engine, "before_cursor_execute", before)
        event.listen(db.engine, "after_cursor_execute", after)
    rendering = {"ms": 0.0}
    original = app.jinja_env.get_template

    def timed_template(*args, **kwargs):
        template = original(*args, **kwargs)
        if getattr(template, "_timed", False):
            return template
        render = template.render

        def timed_render(*a, **k):
            started = time.perf_counter()
            try:
                return render(*a, **k)
            finally:
                rendering["ms"] += (time.perf_counter() - started) * 1000

        template.render, template._timed = timed_render, True
        return template

    app.jinja_env.get_template = timed_template
    template_rendered.connect(lambda *a, **k: None, app)
    for name, path in pages.items():
        if PAGE and name != PAGE:
            continue
        for _ in range(3):
            assert client.get(path).status_code == 200
        sql.update(n=0, ms=0.0)
        rendering["ms"] = 0.0
        profile = cProfile.Profile() if PAGE else None
        walls, cpus = [], []
        if profile:
            profile.enable()
        for _ in range(N):
            started, cpu = time.perf_counter(), time.process_time()
            client.get(path)
            walls.append((time.perf_counter() - started) * 1000)
            cpus.append((time.process_time() - cpu) * 1000)
        if profile:
            profile.disable()
        # the fastest request is the least disturbed by a loaded machine
        print(f"{name:7} {min(walls):6.1f} ms min, {statistics.median(walls):6.1f} ms p50 ({min(cpus):5.1f} ms CPU min)  "
              f"{sql['n'] / N:5.1f} queries  {sql['ms'] / N:6.1f} ms SQL  "
              f"{rendering['ms'] / N:6.1f} ms template (incl. lazy loads)")
        if profile:
            profile.dump_stats(f"/tmp/console_{name}.prof")
            print(f"{pstats.Stats(profile).total_calls / N:.0f} Python calls per request")
            pstats.Stats(profile).sort_stats(SORT).print_stats(45)


if __name__ == "__main__":
    main()
