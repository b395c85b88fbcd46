"""A template's boards as data: the ``boards.yaml`` beside its server.

The file maps ``boards`` to one entry per board (a file of entries alone is read as that map);
an optional top-level ``defaults`` mapping holds what every board shares (the debug probe's OpenOCD script, what a firmware image is), merged
into each entry, whose own keys win. Other top-level mappings are tables a template reads with
:func:`load_table` (the zephyr template's ``runners``). Template servers, the flash runners and the command line's
warnings (:mod:`.targets`) all read boards through :func:`read_boards`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_LOG = logging.getLogger(__name__)

BOARDS_FILE = "boards.yaml"


def read_boards(path: str | Path) -> dict[str, dict[str, Any]]:
    """The boards of the ``boards.yaml`` at ``path``, each with the file's ``defaults`` merged in.

    Raises OSError or yaml.YAMLError for a file that cannot be read, ValueError for one that
    holds no ``boards`` mapping."""
    import yaml

    data = yaml.safe_load(Path(path).read_text()) or {}
    boards = data.get("boards", data) if isinstance(data, dict) else None
    if not isinstance(boards, dict):
        raise ValueError(f"{path} holds no 'boards' mapping")
    defaults = (data.get("defaults") or {}) if "boards" in data else {}
    return {name: {**defaults, **entry} if isinstance(entry, dict) else entry
            for name, entry in boards.items()}


def templates_boards(templates_root: Path | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(template name, its boards)`` for every template under ``templates_root`` (default:
    the built-in ones) with a ``boards.yaml``; a file that cannot be read is skipped with a
    warning naming it."""
    import yaml

    from project_api.system import paths

    root = templates_root or paths.templates_dir()
    for path in sorted(root.glob(f"*/{BOARDS_FILE}")):
        try:
            boards = read_boards(path)
        except (OSError, ValueError, yaml.YAMLError) as exc:
            _LOG.warning("skipping %s: %s", path, exc)
            continue
        yield path.parent.name, boards


def load_boards(server_file: str | Path) -> dict[str, dict[str, Any]]:
    """The boards of the ``boards.yaml`` beside a template's server (``__file__``)."""
    return read_boards(Path(server_file).resolve().parent / BOARDS_FILE)


def load_table(server_file: str | Path, key: str) -> dict[str, dict[str, Any]]:
    """A top-level mapping other than ``boards`` and ``defaults`` of the ``boards.yaml`` beside a
    template's server (the zephyr template's ``runners``: what each flash runner can do); {}
    when the file has none. ValueError when ``key`` holds something else than a mapping."""
    import yaml

    path = Path(server_file).resolve().parent / BOARDS_FILE
    data = yaml.safe_load(path.read_text()) or {}
    table = data.get(key) if isinstance(data, dict) else None
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ValueError(f"{path}: {key!r} is not a mapping")
    return {name: dict(entry or {}) for name, entry in table.items()}


def board_entry(template_dir: Path, board: str | None) -> dict[str, Any] | None:
    """``board``'s entry in the template's ``boards.yaml`` (None: no such file or board)."""
    import yaml

    path = Path(template_dir) / BOARDS_FILE
    if board is None or not path.is_file():
        return None
    try:
        entry = read_boards(path).get(board)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        _LOG.debug("%s: %s", path, exc)
        return None
    return entry if isinstance(entry, dict) else None
