"""The one registry of pybench's file formats: every schema name and version, declared once.

A pybench JSON document is an object whose first keys are ``"schema"`` (a name below) and
``"schema_version"`` (an integer). A writer stamps a document with :func:`stamp`; a reader
checks one with :func:`check_document`, which accepts exactly the versions listed here, then
validates the body against the format's schema (:mod:`pybench.io.schemas`), and says in one
line what was found, what was expected and what to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pybench.errors import FileFormatError


@dataclass(frozen=True)
class FileFormat:
    """One kind of pybench file."""

    schema: str
    """Name stored in the document's ``"schema"`` key."""
    version: int
    """The version this pybench writes."""
    reads: tuple[int, ...]
    """The versions this pybench reads."""
    what: str
    """What a person calls it, for messages."""
    made_by: str
    """The command that writes one, for messages."""


RESULT = FileFormat("pybench.result", 1, (1,), "benchmark result", "pybench allreduce ... --json FILE")
MODEL = FileFormat("pybench.model", 1, (1,), "fitted model file", "pybench fit LOG... -o FILE")
PREDICTION = FileFormat("pybench.prediction", 1, (1,), "prediction", "pybench predict MODEL ... --json FILE")
COMPUTE = FileFormat("pybench.compute", 1, (1,), "compute profile", "pybench compute ... --json FILE")
CCR = FileFormat("pybench.ccr", 1, (1,), "CCR table", "pybench ccr ... --json FILE")
PLAN = FileFormat("pybench.plan", 1, (1,), "plan", "pybench plan ... --json FILE")
PROFILE = FileFormat("pybench.profile", 1, (1,), "step profile", "pybench profile ... --json FILE")
COMPARISON = FileFormat("pybench.comparison", 1, (1,), "comparison", "pybench compare A B --json FILE")
COPY = FileFormat("pybench.copy", 1, (1,), "copy bandwidth result", "pybench copy ... --json FILE")
P2P_MATRIX = FileFormat("pybench.p2p_matrix", 1, (1,), "GPU pair matrix", "pybench p2p --matrix --json FILE")

FORMATS: dict[str, FileFormat] = {f.schema: f for f in (RESULT, MODEL, PREDICTION, COMPUTE, CCR, PLAN, PROFILE,
                                                         COMPARISON, COPY, P2P_MATRIX)}


# The typed schema of each format's body ("module:class" under pybench.io). Named, not imported: pydantic
# loads when a document is checked, not with every module that names a format (the launcher's guard
# process runs on a system python that may not have it). PREDICTION, PLAN and COPY are written, never read.
BODY_SCHEMAS = {RESULT.schema: "schemas:ResultSchema", MODEL.schema: "document_schemas:ModelSchema",
                COMPUTE.schema: "document_schemas:ComputeSchema", CCR.schema: "document_schemas:CCRSchema",
                PROFILE.schema: "document_schemas:ProfileSchema",
                COMPARISON.schema: "document_schemas:ComparisonSchema",
                P2P_MATRIX.schema: "document_schemas:PairMatrixSchema"}


def stamp(fmt: FileFormat, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as a document of ``fmt``: schema and version first, then the body's keys."""
    return {"schema": fmt.schema, "schema_version": fmt.version, **body}


def schema_of(data: Any) -> str | None:
    """The document's schema name, or None when it has none (not a pybench document)."""
    if isinstance(data, dict) and isinstance(data.get("schema"), str):
        return data["schema"]
    return None


def check_document(data: Any, fmt: FileFormat, source: str) -> dict[str, Any]:
    """``data`` when it is a readable document of ``fmt``; else one FileFormatError line naming ``source``."""
    if not isinstance(data, dict):
        raise FileFormatError(f"{source}: not a pybench {fmt.what} (a JSON {type(data).__name__}, "
                              f"expected an object with \"schema\": \"{fmt.schema}\")")
    got = data.get("schema")
    if got != fmt.schema:
        other = FORMATS.get(got) if isinstance(got, str) else None
        hint = f"; it is a {other.what}, written by `{other.made_by}`" if other else ""
        raise FileFormatError(f"{source}: schema {got!r} is not {fmt.schema!r} (a pybench {fmt.what}){hint}")
    version = data.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise FileFormatError(f"{source}: schema_version {version!r} is not a positive integer")
    if version not in fmt.reads:
        newer = version > max(fmt.reads)
        remedy = "upgrade pybench to read it" if newer else f"rewrite it with `{fmt.made_by}`"
        raise FileFormatError(f"{source}: {fmt.schema} version {version} is {'newer than' if newer else 'not'} "
                              f"what this pybench reads ({', '.join(map(str, fmt.reads))}); {remedy}")
    schema = BODY_SCHEMAS.get(fmt.schema)
    if schema is not None:
        import importlib

        from pybench.io.schemas import validate_body

        module, name = schema.split(":")
        validate_body(data, getattr(importlib.import_module(f"pybench.io.{module}"), name), source)
    return data
