"""The console-latency baseline: a bare Flask route that renders a template of a
given size, served by the same gunicorn settings as the console."""

from flask import Flask, render_template_string

TEMPLATE = "<!doctype html><html><body>{% for i in range(rows) %}<p>{{ filler }}</p>{% endfor %}</body></html>"


def create_app() -> Flask:
    app = Flask("bare")

    @app.get("/bare/<int:size>")
    def bare(size: int):
        rows = max(1, size // 107)
        return render_template_string(TEMPLATE, rows=rows, filler="x" * 100)

    return app
