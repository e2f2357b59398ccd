"""Bar charts drawn on the server as inline SVG (SPEC DSA-6): no JavaScript, no
library, CSP-safe (geometry in SVG attributes, colours in ``static/console.css``
classes, never a ``style`` attribute). `bar_chart` computes the geometry;
``templates/_macros/charts.html`` writes the SVG, its <title> and <desc>; each
chart sits beside the table that holds the same figures (its accessible equivalent)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

WIDTH = 640  # the viewBox; the picture scales to its box (CSS)
ROW = 40  # a label line and a bar under it
BAR_HEIGHT = 14
VALUE_ROOM = 70  # room right of the longest bar for its value


@dataclass(frozen=True)
class Bar:
    """One bar: its words, value and place in the viewBox (user units)."""

    key: str
    label: str
    value: int
    label_y: int
    bar_y: int
    width: float
    value_x: float
    value_y: int


@dataclass(frozen=True)
class BarChart:
    """A horizontal bar chart: `bars` in the viewBox ``0 0 width height``."""

    chart_id: str
    title: str
    bars: tuple[Bar, ...]
    width: int
    height: int

    @property
    def description(self) -> str:
        """The chart's figures in words (its SVG <desc>)."""
        return "; ".join(f"{bar.label}: {bar.value}" for bar in self.bars) or "No figures to draw."


def bar_chart(chart_id: str, title: str, figures: Iterable) -> BarChart:
    """A bar per figure with a value above 0 (DSA-6).

    Args:
        chart_id: a unique id in the page (the SVG's title and desc ids start with it).
        title: what the chart shows (its <title>).
        figures: objects with ``key``, ``label`` and ``value`` (int; None counts as 0).

    Returns:
        The `BarChart`; its longest bar is ``WIDTH - VALUE_ROOM`` wide, the others in
        proportion (at least 2 units, so a small value is still seen).
    """
    shown = [f for f in figures if (f.value or 0) > 0]
    top = max((f.value for f in shown), default=0)
    room = WIDTH - VALUE_ROOM
    bars = []
    for index, figure in enumerate(shown):
        y = index * ROW
        width = max(2.0, round(room * figure.value / top, 1))
        value_y = y + 20 + BAR_HEIGHT - 2
        bars.append(Bar(figure.key, figure.label, figure.value, y + 14, y + 20, width, width + 6, value_y))
    return BarChart(chart_id, title, tuple(bars), WIDTH, max(ROW, ROW * len(bars)))
