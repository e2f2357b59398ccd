"""The repository's layout keeps saying where things are (docs/architecture.md):
services stay small enough to read, and a module's name says its layer."""

from __future__ import annotations

import re
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"
MAX_SERVICE_LINES = 450


def modules(folder: str) -> list[Path]:
    return sorted((APP / folder).rglob("*.py"))


def test_no_service_module_is_over_450_lines():
    lines = {str(p.relative_to(APP)): len(p.read_text().splitlines()) for p in modules("services")}
    long = {name: n for name, n in lines.items() if n > MAX_SERVICE_LINES}
    assert long == {}


def test_no_module_name_is_both_a_domain_rule_and_a_service():
    domain = {p.name for p in modules("domain")} - {"__init__.py"}
    services = {p.name for p in modules("services")} - {"__init__.py"}
    assert domain & services == set()


def test_an_import_alias_names_one_module():
    """In the services, ``import x as rules`` once meant four different modules; an
    alias now says which. (A view imports its own service ``as service``.)"""
    aliases: dict[str, set[str]] = {}
    for path in modules("services"):
        for module, alias in re.findall(r"^from [\w.]+ import (\w+) as (\w+)$", path.read_text(), re.M):
            aliases.setdefault(alias, set()).add(module)
    assert {alias: names for alias, names in aliases.items() if len(names) > 1} == {}
