"""Datasets: the rows (samples) that give traces their ground truth.

letta-evals and AI GO! grade a trace against a dataset row (``input``,
``ground_truth``, ``agent_state``, custom fields used in templates). A
dataset is a JSONL file (one sample per line), or a JSON/YAML list of samples.
Rows are matched to traces by one of their fields (``--dataset-key``,
default ``id``), compared as text with the trace id.

This module reads files: it is an edge, used by the CLI before grading
starts; the engine receives the rows as plain data.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec
import yaml

from trajgrade._util.depth import decode_bounded
from trajgrade._util.locate import one_line, yaml_line
from trajgrade.config import _yaml as _yaml
from trajgrade.errors import InputError, Location

if TYPE_CHECKING:
    from trajgrade.engine.dataset import DatasetMatch

__all__ = ("load_dataset", "unmatched_note")


def load_dataset(path: str | os.PathLike[str], *, key: str = "id") -> dict[str, Any]:
    """Read a dataset; return its samples by ``str(sample[key])``.

    Raises InputError naming the file, line and field of the first bad row
    (a dataset is small and is read whole before grading starts).
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            data = f.read()
    except OSError as exc:
        msg = f"cannot read dataset: {exc.strerror or exc}; check the path"
        raise InputError(msg, location=Location(file=name)) from None
    rows: list[tuple[int | None, Any]]
    if name.endswith(".jsonl"):
        rows = []
        for n, line in enumerate(data.split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                rows.append((n, decode_bounded(msgspec.json, line)))
            except (msgspec.DecodeError, UnicodeDecodeError) as exc:
                msg = f"not valid JSON ({exc}); a .jsonl dataset has one sample object per line"
                raise InputError(msg, location=Location(file=name, line=n)) from None
    else:
        try:
            doc = (
                decode_bounded(msgspec.json, data)
                if name.endswith(".json")
                else _yaml.safe_load(data)  # datasets are letta/AI GO! (YAML 1.1)
            )
        except (msgspec.DecodeError, UnicodeDecodeError, yaml.YAMLError) as exc:
            msg = f"cannot parse dataset: {one_line(exc)}"
            raise InputError(
                msg, location=Location(file=name, line=yaml_line(exc))
            ) from None
        if isinstance(doc, Mapping) and isinstance(doc.get("samples"), list):
            doc = doc["samples"]
        if not isinstance(doc, list):
            msg = "a JSON/YAML dataset must be a list of samples (or {samples: [...]})"
            raise InputError(msg, location=Location(file=name))
        rows = [(None, row) for row in doc]
    out: dict[str, Any] = {}
    for i, (lineno, row) in enumerate(rows):
        where = Location(file=name, line=lineno, field=None if lineno else f"[{i}]")
        if not isinstance(row, Mapping):
            msg = f"a sample must be an object, got {type(row).__name__}"
            raise InputError(msg, location=where)
        if key not in row:
            msg = f"sample has no {key!r} field to match it to a trace; set --dataset-key to the field holding the trace id"
            raise InputError(msg, location=where)
        ident = str(row[key])
        if ident in out:
            msg = f"two samples have {key} = {ident!r}; sample ids must be unique"
            raise InputError(msg, location=where)
        out[ident] = dict(row)
    return out


def unmatched_note(match: DatasetMatch, *, path: str, key: str) -> str | None:
    """The warning for rows that found no trace and traces that found no
    row, with the likely fix; None when every row and trace found its match.

    A run with a dataset whose keys fit no trace id is otherwise silent: the
    graders that need a row give ``error`` verdicts, and nothing says why.
    """
    missed = []
    if match.rows_unmatched:
        missed.append(f"{match.rows_unmatched} of {match.rows} rows matched no trace")
    if match.traces_without_row:
        traces = match.traces_with_row + match.traces_without_row
        example = f" (e.g. {match.example_trace!r})" if match.example_trace else ""
        missed.append(
            f"{match.traces_without_row} of {traces} traces had no row{example}"
        )
    if not missed:
        return None
    return (
        f"dataset {path}: {'; '.join(missed)}. A row is matched by its {key!r} field, "
        "as text, to the trace id: check --dataset-key, and --trace-id for logs "
        "whose events carry no trace id"
    )
