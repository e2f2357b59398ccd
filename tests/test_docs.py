"""The repository documents itself, truthfully: README and docs/*.md point at nothing
outside the checkout, every link, command, path and variable they name exists, and
docs/rules.md names every rule id the code and the tests use."""

from __future__ import annotations

import re
from pathlib import Path

import click
import flask.cli
import pytest

from app.domain.case_states import MACHINES
from app.domain.states import TRANSITIONS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
RULES = (ROOT / "docs" / "rules.md").read_text()
DOCS = {path: path.read_text() for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
FAMILIES = [
    "ID",
    "PREP",
    "APPR",
    "DLV",
    "RCPT",
    "API",
    "PRE",
    "RTRY",
    "WAIT",
    "COMP",
    "CORR",
    "EVT",
    "AUD",
    "FOUR",
    "REC",
    "SEC",
    "EDGE",
    "REV",
    "TEMP",
    "CONN",
    "PLAT",
    "BULK",
    "QUEUE",
    "POL",
    "DSA",
    "OPS",
]
BUILT = FAMILIES  # every family is built (docs/rules.md, Status)
RULE_ID = re.compile(r"\b(" + "|".join(FAMILIES) + r")-(\d+)\b")
LINK = re.compile(r"\]\(([^)#]+)(?:#[^)]*)?\)")


def used_ids(folder: str) -> set[str]:
    return {
        f"{m.group(1)}-{m.group(2)}"
        for path in (ROOT / folder).rglob("*.py")
        for m in RULE_ID.finditer(path.read_text())
    }


def documented_ids() -> list[str]:
    return re.findall(r"^\* \*\*([A-Z]+-\d+)\*\*", RULES, re.M)


def test_readme_shows_what_it_is_and_both_commands_on_its_first_screen():
    """A new user sees within README's first screen (40 lines) what the console is, its
    picture, how to start it and how to test it; the rest lives in docs/."""
    first_screen = "\n".join(README.splitlines()[:40])
    assert "action console for Trust & Safety teams" in first_screen
    assert "](static/docs/proposal-detail.png)" in first_screen
    assert first_screen.count("flask --app app demo\n```") == 1
    assert "\n```bash\nbash .ci/test\n```\n" in first_screen
    assert "Python ≥ 3.11" in first_screen and "venv" in first_screen
    assert len(README.splitlines()) <= 120, "README is a front page; put the rest in docs/"
    for page in ("tour", "architecture", "operations", "platforms", "testing", "rules"):
        assert f"](docs/{page}.md)" in README, page


def test_every_rule_id_in_code_and_tests_is_documented():
    documented = documented_ids()
    assert len(documented) == len(set(documented)), "a rule is documented twice"
    missing = (used_ids("app") | used_ids("tests")) - set(documented)
    assert not missing, f"ids used but not in docs/rules.md: {sorted(missing)}"


def test_every_built_rule_is_checked_by_a_test():
    """Each rule of the built families is named in the docstring of some test."""
    tested = used_ids("tests")
    untested = [rule for rule in documented_ids() if rule.split("-")[0] in BUILT and rule not in tested]
    assert not untested, untested


def test_rules_are_documented_family_by_family_in_order():
    families = [rule.split("-")[0] for rule in documented_ids()]
    assert list(dict.fromkeys(families)) == FAMILIES
    for family in FAMILIES:
        numbers = [int(rule.split("-")[1]) for rule in documented_ids() if rule.startswith(family + "-")]
        assert numbers == list(range(1, len(numbers) + 1)), family


# --- Links, commands, paths and variables in README.md and docs/*.md ---------------

LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^[ \t]*```[^\n]*\n(.*?)^[ \t]*```", re.M | re.S)
INLINE = re.compile(r"`([^`]+)`")
FLASK = re.compile(r"\bflask (?:--app app )?([a-z][\w-]*)([^`#\n]*)")
BASH = re.compile(r"\bbash ((?:\.ci|bench)/[\w.-]+)")
REPO_PATH = re.compile(r"(?<![\w/.~-])((?:app|tests|docs|migrations|static|templates|bench|\.ci)/[\w./-]*)")
WORKER = re.compile(r"\bworker\.py((?: [^`]*)?)")
ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|BIND")
SHELL_ASSIGN = re.compile(r"(?:^|export |\s)([A-Z][A-Z0-9_]+)=", re.M)
# Python: os.environ.get("X"), os.environ["X"], getenv("X"), env_bool("X"); shell: $X, ${X}
ENV_READ = re.compile(
    r"""(?:environ(?:\.get|\.setdefault|\.pop)?\(?\[?|getenv\(|env_\w+\()\s*["']([A-Z][A-Z0-9_]+)["']"""
    r"""|\$\{?([A-Z][A-Z0-9_]+)""",
)
CONFIG_SOURCES = ["app/config.py", "app/__init__.py", "app/cli.py", "app/faults.py", "gunicorn.conf.py"]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    body = FENCE.sub("", text)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", body, re.M)}


def code_spans(text: str) -> list[str]:
    """Fenced blocks (continuation lines joined, comments dropped) and inline code."""
    spans = []
    for block in FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            spans.append(re.sub(r"\s+#\s.*$", "", line))
    spans += [" ".join(m.split()) for m in INLINE.findall(FENCE.sub("", text))]
    return spans


def read_environment_names() -> set[str]:
    """Every environment variable the repository's code or scripts read."""
    files = [*ROOT.glob("app/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("bench/*.py"), *ROOT.glob(".ci/*")]
    files += [ROOT / "worker.py", ROOT / "gunicorn.conf.py", ROOT / "bench" / "run", ROOT / "Procfile"]
    return {name for path in files for m in ENV_READ.finditer(path.read_text()) for name in m.groups() if name}


def python_names() -> set[str]:
    """Upper-case names the application defines (constants, settings)."""
    return {
        m.group(1)
        for path in ROOT.glob("app/**/*.py")
        for m in re.finditer(r"\b([A-Z][A-Z0-9_]+)\s*(?::[^=\n]*)?=(?!=)", path.read_text())
    }


def cli_commands(app) -> dict[str, click.Command]:
    """`flask --app app <command>`: the app's own commands and Flask's built-in ones."""
    built_in = {"run": flask.cli.run_command, "shell": flask.cli.shell_command, "routes": flask.cli.routes_command}
    return {**app.cli.commands, **built_in}


def command_problem(commands: dict[str, click.Command], name: str, rest: str) -> str | None:
    """Why `flask --app app name rest` would not run as written, or None."""
    command = commands.get(name)
    if command is None:
        return f"no command {name!r}"
    words = rest.split()
    if isinstance(command, click.Group):
        if not words or words[0] not in command.commands:
            return f"no subcommand {words[:1]} of {name!r}"
        command, words = command.commands[words[0]], words[1:]
    known = {opt for param in command.params for opt in param.opts + param.secondary_opts}
    unknown = [w.split("=")[0] for w in words if w.startswith("--") and w.split("=")[0] not in known | {"--help"}]
    return f"{name!r} has no option {unknown}" if unknown else None


def doc_problems(docs: dict[Path, str], commands: dict[str, click.Command]) -> list[str]:
    """Every untrue link, command, path or variable in `docs` (path -> markdown)."""
    problems = []
    env_read, defined = read_environment_names(), python_names()
    worker_options = set(re.findall(r"add_argument\(\s*\"(--[\w-]+)\"", (ROOT / "worker.py").read_text()))
    for path, text in docs.items():
        name = path.relative_to(ROOT).as_posix()
        if "shared/" in text or "SPEC.md" in text:
            problems.append(f"{name}: names a file outside the repository")
        for target in LINK.findall(text):
            if target.startswith(("http://", "https://")):
                if not target.startswith(("http://127.0.0.1", "http://localhost")):
                    problems.append(f"{name}: links outside the repository: {target}")
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.is_relative_to(ROOT) or not linked.exists():
                problems.append(f"{name}: links to {target}, which is not in the repository")
            elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked.read_text())):
                problems.append(f"{name}: links to {target}, which has no heading #{anchor}")
        for span in code_spans(text):
            for m in FLASK.finditer(span):
                if problem := command_problem(commands, m.group(1), m.group(2)):
                    problems.append(f"{name}: `flask --app app {m.group(1)}{m.group(2)}`: {problem}")
            for m in WORKER.finditer(span):
                if unknown := {w for w in m.group(1).split() if w.startswith("--")} - worker_options:
                    problems.append(f"{name}: `worker.py{m.group(1)}`: worker.py has no option {sorted(unknown)}")
            for script in set(BASH.findall(span) + REPO_PATH.findall(span)):
                if not any(c in script for c in "<>*…{") and not (ROOT / script.rstrip(".,:;)")).exists():
                    problems.append(f"{name}: names {script}, which is not in the repository")
            for var in SHELL_ASSIGN.findall(span) + ([span] if ENV_NAME.fullmatch(span) else []):
                if var not in env_read and var not in defined:
                    problems.append(f"{name}: names {var}, which no code reads from the environment or defines")
    return problems


def test_every_link_command_path_and_variable_in_the_docs_exists(app):
    """README.md and docs/*.md: relative links reach files (and headings) of the
    checkout; every `flask --app app …` is a command of the app's CLI with the options
    used; `worker.py` is given only its options; every `bash .ci/…`, `bench/…` and
    other repository path exists; every upper-case variable is read from the
    environment or defined by the app."""
    assert len(DOCS) >= 7
    assert doc_problems(DOCS, cli_commands(app)) == []


def test_the_check_catches_a_missing_command_option_file_anchor_and_variable(app):
    """The check above fails on a doc that names what does not exist."""
    broken = (
        "[gone](docs/nowhere.md) [no heading](docs/tour.md#nowhere) "
        "`flask --app app launch-rockets` `flask --app app demo --colour red` "
        "`bash .ci/deploy` `bench/missing.py` `NOT_A_SETTING` `python worker.py --turbo`\n"
    )
    problems = doc_problems({ROOT / "README.md": broken}, cli_commands(app))
    assert len(problems) == 8, problems


def test_the_configuration_table_is_what_the_code_reads():
    """docs/operations.md's table lists every variable app/config.py reads, and each
    variable in it is read by the code that configures the console."""
    table = (ROOT / "docs" / "operations.md").read_text().split("\n## Configuration\n", 1)[1].split("\n## ")[0]
    listed = {var for row in re.findall(r"^\| `([^|]+)` \|", table, re.M) for var in re.findall(r"[A-Z][A-Z0-9_]+", row)}
    sources = "".join((ROOT / f).read_text() for f in CONFIG_SOURCES)
    read = {name for m in ENV_READ.finditer(sources) for name in m.groups() if name}
    config_reads = {name for m in ENV_READ.finditer((ROOT / "app/config.py").read_text()) for name in m.groups() if name}
    assert sorted(listed - read) == []
    assert sorted(config_reads - listed) == []


def test_the_proposal_state_table_in_the_docs_is_the_codes():
    """docs/architecture.md's proposal table has exactly the moves of app/domain/states.py."""
    proposal = (ROOT / "docs" / "architecture.md").read_text().split("### The case objects")[0]
    assert table(proposal) == transitions(TRANSITIONS)


@pytest.mark.parametrize("machine", MACHINES, ids=lambda machine: machine.name)
def test_each_case_object_state_table_in_the_docs_is_the_codes(machine):
    """docs/architecture.md has one table per case object's machine (app/domain/case_states.py)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = re.search(rf"^#### {machine.name}\n(.*?)(?=^#|\Z)", text, re.M | re.S)
    assert section is not None, machine.name
    assert table(section.group(1)) == transitions(machine.transitions)


def table(text: str) -> dict:
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \| `(\w+)` \|$", text, re.M)
    return {move: (frozenset(re.findall(r"`(\w+)`", sources)), to) for move, sources, to in rows}


def transitions(table_of_moves) -> dict:
    return {move.value: (frozenset(s.value for s in src), dst.value) for move, (src, dst) in table_of_moves.items()}
