"""``-o profile=true``: make the extracted archive a profile build at generate time.

An archive from ``project-api emit`` calls ``TVMGEN_OP_HOOK(node)`` before each operator;
:func:`instrument_model` rewrites its C and header as ``emit --profile`` would have written them
(:mod:`.profile_build`) and marks the module ``"profile": true`` in ``metadata.json``,
so the model glue answers ``project_api.tools.profile`` and ``project-api profile`` reads per-operator
times. A module compiled by TVM has no hooks: it is refused in one line, since profiling can
only time it whole (which ``project-api profile`` does for any build).
"""

from __future__ import annotations

import json
from pathlib import Path

from project_api.errors import ServerError
from project_api.template.options import option

__all__ = ["PROFILE_OPTION", "instrument_model"]

#: The option every template that links the runtime's profile glue declares.
PROFILE_OPTION = option(
    "profile", "bool", default=False, optional=["generate_project"],
    help="Time every operator on the device (as 'project-api emit --profile' does) for "
         "'project-api profile'; needs an archive from project-api emit.")


def instrument_model(model_dir: Path, archive: str = "model.tar") -> list[str]:
    """Make every module of the extracted archive in ``model_dir`` a profile build; return the
    names of the modules it changed (those already profile builds are left as they are)."""
    from project_api.template.profile_build import instrument_sources, is_instrumented

    meta_path = Path(model_dir) / "metadata.json"
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError) as exc:
        raise ServerError(message=f"profile=true: cannot read {archive}'s metadata.json "
                                  f"({exc})") from None
    changed = []
    for name, entry in (meta.get("modules") or {}).items():
        src = Path(model_dir) / "codegen" / "host" / "src" / f"{name}_lib0.c"
        hdr = Path(model_dir) / "codegen" / "host" / "include" / f"tvmgen_{name}.h"
        if not (src.is_file() and hdr.is_file()):
            raise ServerError(message=(
                f"profile=true: module {name!r} of {archive} is not project-api emit's C (no "
                f"codegen/host/src/{name}_lib0.c with its header), so its operators cannot be "
                "timed one by one; generate without profile=true ('project-api profile' then "
                "times the whole model)"))
        source = src.read_text()
        if is_instrumented(source, name):
            entry["profile"] = True
            continue
        try:
            new_source, new_header = instrument_sources(name, source, hdr.read_text())
        except ValueError as exc:
            raise ServerError(message=f"profile=true: {archive}: {exc}; generate without "
                                      "profile=true ('project-api profile' then times the "
                                      "whole model)") from None
        src.write_text(new_source)
        hdr.write_text(new_header)
        entry["profile"] = True
        changed.append(name)
    meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return changed
