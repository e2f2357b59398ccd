"""A state is written only by its object's guarded move (APPR-5, CORR-4, WAIT-1).

Reads every module of `app/` (its syntax tree, so formatting does not hide a
write) for the ways a state can be written outside a guarded move:

* ``x.state = ...`` / ``x.completion_state = ...``, alone or in a tuple assignment,
  and ``setattr(x, "state", ...)``;
* ``.values(state=...)`` or ``.values({"state": ...})`` of an UPDATE;
* ``set_committed_value(x, "state", ...)``.

A new row is built in its initial state (``Report(state=ReportState.OPEN)``): that
is no move, and not looked for. The proposal's guarded move is
`app/models/proposals.py`; every case object's is `app/models/moves.py`.
"""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"
STATE_COLUMNS = {"state", "completion_state"}
# app/models/dsa.py: a statement of reasons' guarded move (DSA-3), its machine
# `app.domain.dsa_answers.DSA_STATEMENT`
GUARDED_MOVES = {"app/models/proposals.py", "app/models/moves.py", "app/models/dsa.py"}

# Objects with states of their own that are not case objects, each written by one
# guarded UPDATE or by the one transaction that owns the row.
NOT_CASE_OBJECTS = {
    # workflow dispatch outbox rows: delivered or failed by the wake-up that holds them (EVT-2)
    ("app/services/lifecycle/runs.py", 'row.state = "delivered"'),
    ("app/services/lifecycle/runs.py", 'row.state = "failed"'),
    # a configuration change's review (FOUR-2): its own ChangeState and guarded UPDATE
    ("app/services/admin/reviews.py", ".values(state=state.value, decided_at=utcnow(), **values)"),
    ("app/services/admin/reviews.py", ".values(state=ChangeState.APPLIED.value, result=result, secrets=None)"),
    # an erasure request's decision (OPS-4): its own state, one guarded UPDATE on the locked row
    (
        "app/services/admin/erasure_requests.py",
        ".values(state=state.value, decided_by=operator.id, decided_at=now, **values)",
    ),
    # an emergency action's retrospective review (POL-6): open → agreed or disagreed by one guarded UPDATE
    ("app/services/lifecycle/emergency.py", ".values(state=target.value, **written)"),
    # budget reservations (DLV-3): settled in bulk by one statement
    (
        "app/services/lifecycle/budget_reservations.py",
        '.values(state=bindparam("state"), settled_at=bindparam("at", type_=table.c.settled_at.type))',
    ),
    (
        "app/services/lifecycle/budget_reservations.py",
        '.values(state="consumed", settled_at=bindparam("at", type_=table.c.settled_at.type))',
    ),
}


def _is_state(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in STATE_COLUMNS


def _targets(node: ast.AST):
    if isinstance(node, ast.Tuple | ast.List):
        for element in node.elts:
            yield from _targets(element)
    else:
        yield node


def _writes(tree: ast.AST):
    """The nodes of `tree` that write a state column."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in (t for group in targets for t in _targets(group)):
                if isinstance(target, ast.Attribute) and target.attr in STATE_COLUMNS:
                    yield node
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name == "values":
                dicts = [a for a in node.args if isinstance(a, ast.Dict)]
                dicts += [k.value for k in node.keywords if k.arg is None and isinstance(k.value, ast.Dict)]
                if any(k.arg in STATE_COLUMNS for k in node.keywords) or any(
                    _is_state(key) for d in dicts for key in d.keys
                ):
                    yield node
            elif name in ("setattr", "set_committed_value") and len(node.args) >= 2 and _is_state(node.args[1]):
                yield node


def _line(node: ast.AST) -> int:
    """The line that writes: for ``update(X).where(...).values(...)``, the one naming ``values``."""
    return node.func.end_lineno if isinstance(node, ast.Call) else node.lineno


def state_writes() -> list[tuple[str, int, str]]:
    """(path, line, source line) of every state write in `app/` outside the guarded moves."""
    found = []
    for path in sorted(APP.rglob("*.py")):
        relative = path.relative_to(APP.parent).as_posix()
        if relative in GUARDED_MOVES:
            continue
        source = path.read_text()
        lines = source.splitlines()
        for node in _writes(ast.parse(source)):
            text = lines[_line(node) - 1].strip()
            if (relative, text) not in NOT_CASE_OBJECTS:
                found.append((relative, _line(node), text))
    return found


def test_no_state_is_written_outside_a_guarded_move():
    assert state_writes() == []


def test_the_allowed_writes_still_exist():
    """An entry of NOT_CASE_OBJECTS that no longer matches is removed, not kept."""
    seen = set()
    for path in sorted(APP.rglob("*.py")):
        relative = path.relative_to(APP.parent).as_posix()
        source = path.read_text()
        lines = source.splitlines()
        seen |= {(relative, lines[_line(node) - 1].strip()) for node in _writes(ast.parse(source))}
    assert NOT_CASE_OBJECTS <= seen


def test_the_search_finds_every_form_of_write():
    """The search itself: each way of writing a state is found, a read is not."""
    written = [
        'report.state = "closed"',
        'correction.state, correction.note = "confirmed", note',
        'a.proposal_id, (b.x, b.completion_state) = 1, (2, "completed")',
        'setattr(task, "state", "open")',
        'update(Appeal).values(state="decided")',
        'update(Appeal).values({"state": "decided"})',
        'update(Appeal).values(**{"completion_state": "completed"})',
        'set_committed_value(run, "state", "running")',
        "row.state: str = 'x'",
    ]
    for source in written:
        assert len(list(_writes(ast.parse(source)))) == 1, source
    read = [
        'if report.state == "closed": pass',
        'Report(state="open")',
        'update(Appeal).values(note="x")',
        'x = {"state": report.state}',
        'getattr(task, "state")',
    ]
    for source in read:
        assert list(_writes(ast.parse(source))) == [], source
