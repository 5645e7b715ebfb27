"""`CompiledCheckCellMetadata` gives nbgrader's verdict on every cell, and compiles the schema once."""
import copy
import json
from pathlib import Path

import jsonschema
import nbformat
import pytest
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from nbgrader.preprocessors import CheckCellMetadata

from autograder.nbgrader import metadata, pipelines
from autograder.nbgrader.metadata import CompiledCheckCellMetadata

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "source" / "sdpa" / "sdpa.ipynb"


def _meta(**changes):
    meta = {"grade": True, "solution": True, "locked": False, "points": 2, "grade_id": "x", "schema_version": 3}
    meta.update(changes)
    return {k: v for k, v in meta.items() if v is not _DROP}


_DROP = object()
VARIANTS = [
    _meta(),
    _meta(points=-1),  # below the schema's minimum
    _meta(points="2"),  # wrong type
    _meta(grade_id=_DROP),  # required key missing
    _meta(solution=_DROP),
    _meta(grade_id=""),
    _meta(grade_id="a b"),
    _meta(extra="kept?"),  # a key the schema does not name
    _meta(schema_version=2),  # too old: the stock error
    _meta(schema_version=4),  # too new
    _meta(schema_version=_DROP),  # counts as 0
    _meta(grade=False, solution=False, locked=True, points=_DROP),
    _meta(cell_type="markdown"),
    {"grade": "yes"},
    {},
]


def _verdict(validator, meta, cell_type="code"):
    cell = nbformat.v4.new_code_cell("x = 1") if cell_type == "code" else nbformat.v4.new_markdown_cell("x")
    cell.metadata["nbgrader"] = copy.deepcopy(meta)
    try:
        validator.validate_cell(cell)
    except Exception as exc:  # noqa: BLE001 - the verdict is the exception
        return type(exc).__name__, str(exc)
    return None


@pytest.mark.parametrize("meta", VARIANTS, ids=[json.dumps(v, default=str)[:60] for v in VARIANTS])
@pytest.mark.parametrize("cell_type", ["code", "markdown"])
def test_every_cell_gets_the_stock_verdict_and_message(meta, cell_type):
    assert _verdict(metadata._Validator(), meta, cell_type) == _verdict(MetadataValidator(), meta, cell_type)


def test_whole_notebooks_get_the_stock_verdict():
    nb = nbformat.read(SOURCE, as_version=4)
    for step in (CheckCellMetadata(), CompiledCheckCellMetadata()):
        step.preprocess(copy.deepcopy(nb), {})  # the lesson is valid for both
    broken = copy.deepcopy(nb)
    graded = [c for c in broken.cells if c.metadata.get("nbgrader", {}).get("grade")]
    graded[1].metadata.nbgrader["grade_id"] = graded[0].metadata.nbgrader["grade_id"]  # duplicate id
    for step in (CheckCellMetadata(), CompiledCheckCellMetadata()):
        with pytest.raises(ValidationError, match="may be corrupted"):
            step.preprocess(copy.deepcopy(broken), {})


def test_the_schema_is_checked_once_per_process(monkeypatch):
    cls = jsonschema.validators.validator_for(MetadataValidator().schema)
    original = cls.check_schema.__func__
    calls = []

    def counting(klass, schema, *a, **k):
        calls.append(1)
        return original(klass, schema, *a, **k)

    monkeypatch.setattr(metadata, "_COMPILED", {})
    monkeypatch.setattr(cls, "check_schema", classmethod(counting))
    nb = nbformat.read(SOURCE, as_version=4)
    CheckCellMetadata().preprocess(copy.deepcopy(nb), {})
    stock = len(calls)
    calls.clear()
    for _ in range(3):
        CompiledCheckCellMetadata().preprocess(copy.deepcopy(nb), {})
    assert stock > 50 and len(calls) == 1  # stock: once per cell with nbgrader metadata


def test_the_pipelines_use_it_in_place_of_the_stock_step():
    steps = pipelines()
    for trait in ("Autograde.sanitize_preprocessors", "Autograde.autograde_preprocessors"):
        assert CompiledCheckCellMetadata in steps[trait] and CheckCellMetadata not in steps[trait]
