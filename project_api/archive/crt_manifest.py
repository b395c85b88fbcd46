"""Reader of ``crt/libraries.txt``: the C runtime's libraries, their sources, and which libraries
each project type builds.

The manifest is the one list of the runtime's sources; ``crt/Makefile`` reads it with awk, CMake
generators with ``file(STRINGS)``, template servers with this module. Its format (see the file's
header) is one entry per line, fields separated by white space, ``#`` lines and blank lines
ignored::

    library <name> <glob> [<glob> ...]      sources of a library, globs relative to crt/
    headers <library> <glob> [<glob> ...]   private headers of a library (copied, not compiled)
    project <type> <library> [<library> ...]  the libraries a project type compiles, link order

Typical use by a template server that copies the runtime into a generated project::

    manifest = read_manifest(crt_dir)
    sources = manifest.project_sources("host_driven")
    for rel in [*sources, *manifest.private_headers(sources)]:
        copy(crt_dir / rel, project_dir / "crt" / rel)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

MANIFEST_NAME = "libraries.txt"


class CrtManifestError(ValueError):
    """The manifest is malformed, or names a library, project type or file that does not exist."""


@dataclass(frozen=True)
class CrtManifest:
    """The parsed manifest of the C runtime at ``crt_dir``.

    ``libraries`` maps each library to its source globs, ``headers`` a library to its private
    header globs (libraries without private headers are absent), and ``projects`` each project
    type to its libraries, all in file order.
    """

    crt_dir: Path
    libraries: dict[str, tuple[str, ...]]
    projects: dict[str, tuple[str, ...]]
    headers: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def library_sources(self, library: str) -> list[PurePosixPath]:
        """The sources of ``library``, relative to ``crt_dir``, sorted; each glob must match."""
        return self._resolve(library, self._globs(library), "library")

    def library_headers(self, library: str) -> list[PurePosixPath]:
        """The private headers of ``library``, relative to ``crt_dir``, sorted (none if the
        manifest lists no ``headers`` line for it); each glob must match."""
        return self._resolve(library, self.headers.get(library, ()), "headers")

    def private_headers(self, sources: Iterable[str | PurePosixPath]) -> list[PurePosixPath]:
        """The private headers of every library that owns one of ``sources`` (paths relative to
        ``crt_dir``), in library order: what a copy of those sources needs beside them."""
        wanted = {PurePosixPath(s) for s in sources}
        headers: list[PurePosixPath] = []
        for library in self.libraries:
            if wanted & set(self.library_sources(library)):
                headers.extend(self.library_headers(library))
        return headers

    def _globs(self, library: str) -> tuple[str, ...]:
        globs = self.libraries.get(library)
        if globs is None:
            raise CrtManifestError(
                f"{self._path}: no library {library!r}; the libraries are "
                f"{', '.join(self.libraries)}"
            )
        return globs

    def _resolve(self, library: str, globs: Iterable[str], entry: str) -> list[PurePosixPath]:
        found: set[PurePosixPath] = set()
        for pattern in globs:
            matches = {
                PurePosixPath(p.relative_to(self.crt_dir).as_posix())
                for p in self.crt_dir.glob(pattern)
                if p.is_file()
            }
            if not matches:
                raise CrtManifestError(
                    f"{self._path}: glob {pattern!r} of {entry} {library!r} matches no file"
                )
            found |= matches
        return sorted(found)

    def project_libraries(self, project_type: str) -> tuple[str, ...]:
        """The libraries project type ``project_type`` builds, in link order."""
        libraries = self.projects.get(project_type)
        if libraries is None:
            raise CrtManifestError(
                f"{self._path}: no project type {project_type!r}; the types are "
                f"{', '.join(self.projects)}"
            )
        return libraries

    def project_sources(self, project_type: str) -> list[PurePosixPath]:
        """Every source project type ``project_type`` compiles, relative to ``crt_dir``, in
        library order and sorted within each library."""
        sources: list[PurePosixPath] = []
        for library in self.project_libraries(project_type):
            sources.extend(self.library_sources(library))
        return sources

    @property
    def _path(self) -> Path:
        return self.crt_dir / MANIFEST_NAME


def read_manifest(crt_dir: str | os.PathLike[str]) -> CrtManifest:
    """Parse ``<crt_dir>/libraries.txt``.

    Raises :class:`CrtManifestError` for an unknown keyword, an entry without items, a name
    given twice, or a project or headers line that names an unknown library; globs are checked
    when resolved.
    """
    root = Path(crt_dir)
    path = root / MANIFEST_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CrtManifestError(f"cannot read the C runtime manifest {path}: {exc}") from exc
    tables: dict[str, dict[str, tuple[str, ...]]] = {"library": {}, "headers": {}, "project": {}}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        where = f"{path}:{number}"
        keyword = fields[0]
        if keyword not in tables:
            raise CrtManifestError(
                f"{where}: unknown entry {keyword!r}; want library, headers or project"
            )
        if len(fields) < 3:
            raise CrtManifestError(f"{where}: {keyword} needs a name and at least one item")
        name, items = fields[1], tuple(fields[2:])
        if name in tables[keyword]:
            raise CrtManifestError(f"{where}: {keyword} {name!r} is given twice")
        if any(item.startswith("#") for item in items):
            raise CrtManifestError(f"{where}: comments go on lines of their own")
        tables[keyword][name] = items
    libraries, projects, headers = tables["library"], tables["project"], tables["headers"]
    for project_type, names in projects.items():
        unknown = [n for n in names if n not in libraries]
        if unknown:
            raise CrtManifestError(
                f"{path}: project {project_type!r} names unknown libraries {', '.join(unknown)}"
            )
    for library in headers:
        if library not in libraries:
            raise CrtManifestError(f"{path}: headers of unknown library {library!r}")
    return CrtManifest(crt_dir=root, libraries=libraries, projects=projects, headers=headers)
