"""`CompiledCheckCellMetadata`: nbgrader's CheckCellMetadata with its JSON schema compiled once.

Stock nbgrader validates each cell's metadata with ``jsonschema.validate``,
which first checks the schema itself against the JSON-Schema metaschema and
builds a new validator -- for every cell, twice per notebook (sanitize and
autograde), which every grading command pays on every submission.  Here the
schema is checked and compiled once per process; each cell then meets the same validator class,
the same schema and the same error choice (``best_match``), so every verdict
and every message is the stock one.  A cell of another schema version takes
the stock path, which raises the stock "too old/too new" error.
"""
from __future__ import annotations

import traceback

import jsonschema
from nbformat import NotebookNode
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from nbgrader.nbgraderformat.common import BaseMetadataValidator
from nbgrader.preprocessors import CheckCellMetadata


class _SchemaCompiledOnce(BaseMetadataValidator):
    """Sits between nbgrader's versioned validator and its base in the MRO: the versioned one's
    `validate_cell` calls `super().validate_cell`, which lands here."""

    def validate_cell(self, cell: NotebookNode) -> None:
        meta = cell.metadata.get("nbgrader") if "nbgrader" in cell.metadata else None
        if meta is None or meta.get("schema_version", 0) != self.schema_version:
            return super().validate_cell(cell)  # nothing to check, or the stock version error
        error = jsonschema.exceptions.best_match(_compiled(self.schema_version, self.schema).iter_errors(meta))
        if error is not None:
            raise error


class _Validator(MetadataValidator, _SchemaCompiledOnce):
    pass


_COMPILED: dict[int, object] = {}  # schema version -> its validator


def _compiled(version: int, schema: dict):
    if version not in _COMPILED:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        _COMPILED[version] = cls(schema)
    return _COMPILED[version]


class CompiledCheckCellMetadata(CheckCellMetadata):
    """Check that the nbgrader metadata is valid and grade ids are unique (nbgrader's step, faster)."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        try:
            _Validator().validate_nb(nb)
        except ValidationError:
            self.log.error(traceback.format_exc())
            msg = "Notebook failed to validate; the nbgrader metadata may be corrupted."
            self.log.error(msg)
            raise ValidationError(msg)  # noqa: B904 - as stock raises it
        return nb, resources
