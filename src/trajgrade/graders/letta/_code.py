"""Finding letta grading functions and extractors that are not built in.

A name that is not built in resolves, as in letta-evals, to ``path.py:func``
(a Python file relative to the config file's directory) when it contains a
colon, and otherwise, in trajgrade, to an installed entry point of the
``trajgrade.letta_functions`` / ``trajgrade.letta_extractors`` group. Entry
points are scanned only then, so built-in names cost nothing.

Running a file named in a config runs arbitrary code, so it needs the
caller's consent (``--allow-code``, ``BuildContext.allow_code``); installed
entry points were consented to when they were installed. Either way the
object must carry the ``@grader`` / ``@extractor`` marker (trajgrade's or
letta-evals'), which guarantees its signature was checked. This runs only
while a suite is compiled, like reading the config file; the per-event core
never imports code.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final, Literal

from trajgrade._util.digest import blake2b
from trajgrade.errors import ConfigError, Location

__all__ = ("EXTRACTOR_GROUP", "FUNCTION_GROUP", "load")

FUNCTION_GROUP: Final = "trajgrade.letta_functions"
EXTRACTOR_GROUP: Final = "trajgrade.letta_extractors"

Role = Literal["grader", "extractor"]

_GROUP: Final[dict[Role, str]] = {
    "grader": FUNCTION_GROUP,
    "extractor": EXTRACTOR_GROUP,
}
_FIELD: Final[dict[Role, str]] = {"grader": "function", "extractor": "extractor"}


def _fail(role: Role, message: str) -> ConfigError:
    return ConfigError(message, location=Location(field=_FIELD[role]))


def load(
    spec: str, role: Role, *, allow_code: bool, base_dir: str | None
) -> Any | None:
    """The decorated callable ``spec`` names, or None when nothing has that name.

    Raises ConfigError (at ``function``/``extractor``) when ``spec`` names
    something that cannot be used.
    """
    import inspect

    if ":" in spec:
        obj = _from_file(spec, role, allow_code=allow_code, base_dir=base_dir)
    else:
        import importlib.metadata  # (tens of ms: only for entry points)

        found = [
            ep
            for ep in importlib.metadata.entry_points(group=_GROUP[role])
            if ep.name == spec
        ]
        if not found:
            return None
        ep = found[0]
        try:
            obj = ep.load()
        except Exception as exc:  # a broken plugin is reported, not raised through
            dist = ep.dist.name if ep.dist else "unknown distribution"
            msg = f"{_GROUP[role]} entry point {spec!r} from {dist} failed to import: {exc!r}; fix or uninstall {dist}"
            raise _fail(role, msg) from exc
    marker = "_is_grader" if role == "grader" else "_is_extractor"
    if not (callable(obj) and getattr(obj, marker, False)):
        msg = (
            f"Loaded object {spec} is not a valid @{role} decorated function. "
            f"Please use the @{role} decorator (from trajgrade.graders.letta.tool import {role})."
        )
        raise _fail(role, msg)
    if inspect.iscoroutinefunction(obj):
        msg = f"{spec} is an async {role}; trajgrade runs {role}s synchronously (its core runs no event loop), so make it a plain def"
        raise _fail(role, msg)
    return obj


def _from_file(spec: str, role: Role, *, allow_code: bool, base_dir: str | None) -> Any:
    import importlib.util

    if not allow_code:
        msg = (
            f"{spec!r} names code in a file, and code named in a config runs only "
            f"when allowed: pass --allow-code (in Python, BuildContext(allow_code=True)) "
            f"to run code named in the config, or "
            f"register it as a `{_GROUP[role]}` entry point"
        )
        raise _fail(role, msg)
    file_part, _, attr = spec.rpartition(":")
    path = Path(file_part)
    if not path.is_absolute():
        if base_dir is None:
            msg = f"relative path {file_part!r} needs the config file's directory, and this config was not read from a file; use an absolute path"
            raise _fail(role, msg)
        path = (Path(base_dir) / path).resolve()
    if not path.exists():
        msg = (
            f"File not found: {path}; paths are relative to the config file's directory"
        )
        raise _fail(role, msg)
    if path.suffix != ".py":
        raise _fail(role, f"File must be a Python file (.py), got: {path}")
    digest = blake2b(str(path).encode(), digest_size=6).hexdigest()
    name = f"_trajgrade_letta_{path.stem}_{digest}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise _fail(role, f"Could not load module from {path}")
    module = importlib.util.module_from_spec(module_spec)
    # Registered before running, as importlib does, so the file's own
    # dataclasses and pickling can find their module.
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # user code: any failure is a config error
        del sys.modules[name]
        msg = f"importing {path} failed: {type(exc).__name__}: {exc}"
        raise _fail(role, msg) from exc
    if not hasattr(module, attr):
        available = ", ".join([n for n in dir(module) if not n.startswith("_")][:10])
        msg = f"Module '{path}' has no attribute '{attr}'. Available: {available}"
        raise _fail(role, msg)
    return getattr(module, attr)
