"""A component's JSON Schemas may only refer inside themselves (SEC-5): the references
are found and resolved by `referencing`, the library `jsonschema` evaluates them with."""

from __future__ import annotations

import pytest

from app.services.admin.component_specs import local_ref_problems

DRAFT_07 = "http://json-schema.org/draft-07/schema#"


@pytest.mark.parametrize(
    "schema",
    [
        {"$defs": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/a"}}},
        {"properties": {"child": {"$ref": "#"}}},
        {"$defs": {"a": {"$anchor": "code", "type": "string"}}, "items": {"$ref": "#code"}},
        {"$dynamicAnchor": "node", "items": {"$dynamicRef": "#node"}},
        {"$defs": {"a/b": {}, "c~d": {}, "é": {}}, "anyOf": [{"$ref": "#/$defs/a~1b"}, {"$ref": "#/$defs/c~0d"}]},
        {"$defs": {"é": {}}, "not": {"$ref": "#/$defs/%C3%A9"}},
        {"allOf": [{"type": "string"}], "not": {"$ref": "#/allOf/0"}},
        {"$id": "https://schemas.example/action", "$defs": {"a": {}}, "not": {"$ref": "#/$defs/a"}},
        {"properties": {"$ref": {"type": "string"}}},  # a property named $ref refers to nothing
        {"const": {"$ref": "https://elsewhere.example/"}},  # a value, never followed
        {"$schema": DRAFT_07, "definitions": {"a": {"$id": "#code"}}, "not": {"$ref": "#code"}},
    ],
)
def test_references_inside_the_schema_pass(schema):
    assert local_ref_problems(schema) == []


@pytest.mark.parametrize(
    "schema, problem",
    [
        (
            {"$ref": "https://evil.example/s.json"},
            "'https://evil.example/s.json': only references inside the schema (starting with #) are allowed.",
        ),
        (
            {"items": {"$ref": "other.json#/a"}},
            "'other.json#/a': only references inside the schema (starting with #) are allowed.",
        ),
        ({"$ref": "#/$defs/missing"}, "'#/$defs/missing' points to nothing in the schema."),
        ({"allOf": [{}], "not": {"$ref": "#/allOf/1"}}, "'#/allOf/1' points to nothing in the schema."),
        ({"allOf": [{}], "not": {"$ref": "#/allOf/x"}}, "'#/allOf/x' points to nothing in the schema."),
        ({"$ref": "#nowhere"}, "'#nowhere' names no $anchor in the schema."),
        ({"$dynamicRef": "#nowhere"}, "'#nowhere' names no $anchor in the schema."),
        ({"properties": {"a": {"$ref": 5}}}, "$ref must be a string."),
        ({"items": {"$dynamicRef": ["#a"]}}, "$dynamicRef must be a string."),
    ],
)
def test_references_that_leave_the_schema_or_miss_are_refused(schema, problem):
    assert local_ref_problems(schema) == [problem]


def test_an_anchor_is_looked_up_in_its_own_resource():
    # The anchor belongs to the embedded resource "inner", not to the root: jsonschema
    # could not follow "#code" from the root either.
    schema = {"$defs": {"inner": {"$id": "https://schemas.example/inner", "$anchor": "code"}}, "$ref": "#code"}
    assert local_ref_problems(schema) == ["'#code' names no $anchor in the schema."]


def test_a_malformed_schema_is_left_to_the_meta_schema_check():
    # Keywords of the wrong type cannot be walked; check_schema names them.
    assert local_ref_problems({"$id": 5, "properties": 5}) == []


def test_at_most_twenty_problems_are_listed():
    schema = {"allOf": [{"$ref": f"#/$defs/missing{n}"} for n in range(30)]}
    assert len(local_ref_problems(schema)) == 20
