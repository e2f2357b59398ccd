"""The repository documents itself: README and docs/ point at nothing outside the
checkout, and docs/rules.md names every rule id the code and the tests use."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
RULES = (ROOT / "docs" / "rules.md").read_text()
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
]
BUILT = FAMILIES[: FAMILIES.index("AUD") + 1]
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


def test_readme_and_docs_point_only_inside_the_repository():
    for name, text in (("README.md", README), ("docs/rules.md", RULES)):
        assert "../" not in text, name
        assert "shared/" not in text and "SPEC.md" not in text, name
        for target in LINK.findall(text):
            if target.startswith(("http://", "https://")):
                assert target.startswith("http://127.0.0.1") or target.startswith("http://localhost"), target
                continue
            base = ROOT if name == "README.md" else ROOT / "docs"
            assert (base / target).exists(), f"{name} links to {target}, which is not in the repository"


def test_readme_keeps_one_demo_command_and_one_test_command():
    assert README.count("flask --app app demo\n```") == 1
    assert "\n```bash\nbash .ci/test\n```\n" in README
    assert (ROOT / ".ci" / "test").exists()
    assert "Python ≥ 3.11" in README and "venv" in README


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
