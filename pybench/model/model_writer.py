"""Writing model files: the document stamped with the registry's MODEL schema, written atomically.

Apart from the reader (:mod:`pybench.model.model_files`) so that a model can save itself
without the model class and the file reader importing each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from pybench.errors import UsageError
from pybench.io.files import json_text, refuse_existing, write_output
from pybench.io.formats import MODEL, stamp


class ModelEntry(Protocol):
    """What a model file holds: anything that turns itself into a JSON object."""

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON types only)."""
        ...


def models_to_document(models: Sequence[ModelEntry], topology: Sequence[ModelEntry] = ()) -> dict[str, Any]:
    """The JSON document for a model file (stamped with the registry's MODEL schema).

    ``topology`` holds the topology-aware models (:mod:`pybench.model.topology`), one per
    collective and backend, fitted over every world size; readers that predate them ignore the key.
    """
    body: dict[str, Any] = {"models": [m.to_dict() for m in models]}
    if topology:
        body["topology"] = [m.to_dict() for m in topology]
    return stamp(MODEL, body)


def save_models(models: Sequence[ModelEntry], path: str | Path, overwrite: bool = False,
                topology: Sequence[ModelEntry] = ()) -> Path:
    """Write models to a versioned JSON file, atomically.

    The document goes to a temporary file in the same directory, is flushed to disk and
    then renamed over ``path`` (``os.replace``), so a reader never sees half a file.

    Parameters
    ----------
    models : sequence of AlphaBetaModel (anything with ``to_dict``)
    path : str or Path
    overwrite : bool
        Refuse (UsageError) to replace an existing file unless True.

    Returns
    -------
    Path
    """
    p = Path(path)
    models = list(models)
    if not models:
        raise UsageError("no models to save")
    refuse_existing(p, overwrite)
    write_output(p, json_text(models_to_document(models, topology)), overwrite)
    return p
