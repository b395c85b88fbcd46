"""crt/libraries.txt, the one list of the C runtime's libraries: it covers every source exactly
once, crt/Makefile builds exactly its libraries, and project_api.archive.crt_manifest reads it."""

from __future__ import annotations

import collections
import re
import subprocess
from pathlib import Path, PurePosixPath

import pytest
from c_build import run_make
from conftest import REPO_ROOT, require_tool

from project_api.archive.crt_manifest import CrtManifestError, read_manifest

CRT_DIR = REPO_ROOT / "crt"


def test_every_source_is_in_exactly_one_library() -> None:
    manifest = read_manifest(CRT_DIR)
    owners: dict[PurePosixPath, list[str]] = collections.defaultdict(list)
    for library in manifest.libraries:
        for source in manifest.library_sources(library):
            owners[source].append(library)
    sources = {PurePosixPath(p.relative_to(CRT_DIR).as_posix()) for p in CRT_DIR.glob("src/**/*.c")}
    assert sorted(sources - set(owners)) == [], "sources in no library of crt/libraries.txt"
    assert {s: o for s, o in owners.items() if len(o) > 1} == {}, "sources in two libraries"
    assert set(owners) == sources


def test_every_private_header_is_in_exactly_one_library() -> None:
    """Private headers live in src/ beside their library (listed by its ``headers`` line); none is
    left in include/, which is the public API."""
    manifest = read_manifest(CRT_DIR)
    owners: dict[PurePosixPath, list[str]] = collections.defaultdict(list)
    for library in manifest.libraries:
        for header in manifest.library_headers(library):
            owners[header].append(library)
    headers = {PurePosixPath(p.relative_to(CRT_DIR).as_posix()) for p in CRT_DIR.glob("src/**/*.h")}
    assert sorted(headers - set(owners)) == [], "private headers in no library's headers line"
    assert {h: o for h, o in owners.items() if len(o) > 1} == {}, "headers in two libraries"
    assert set(owners) == headers
    assert not list((CRT_DIR / "include").rglob("internal")), "include/ holds only public headers"


def test_private_headers_follow_the_sources_that_include_them() -> None:
    manifest = read_manifest(CRT_DIR)
    host_driven = manifest.project_sources("host_driven")
    assert PurePosixPath("src/common/module_table.h") in manifest.private_headers(host_driven)
    assert manifest.private_headers(manifest.project_sources("standalone")) == []
    include = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
    copied = {CRT_DIR / p for p in [*host_driven, *manifest.private_headers(host_driven)]}
    for path in sorted(copied):
        for target in include.findall(path.read_text()):
            assert (path.parent / target).resolve() in copied, f"{path} includes {target}"


def test_project_types() -> None:
    manifest = read_manifest(CRT_DIR)
    assert manifest.project_libraries("standalone") == ("backend",)
    assert manifest.project_libraries("host_driven") == ("runtime", "platform", "backend")
    standalone = manifest.project_sources("standalone")
    assert PurePosixPath("src/memory/stack_allocator.c") in standalone
    assert all(s.parts[1] not in ("rpc_server", "platform") for s in standalone)
    host_driven = manifest.project_sources("host_driven")
    assert len(host_driven) == len(set(host_driven))
    assert PurePosixPath("src/rpc_server/rpc_server.c") in host_driven
    assert PurePosixPath("src/platform/memory_pool.c") in host_driven


def test_makefile_builds_exactly_the_manifest_libraries(tmp_path: Path) -> None:
    require_tool("cc")
    ar = require_tool("ar")
    proc = run_make(CRT_DIR, tmp_path, "all")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    manifest = read_manifest(CRT_DIR)
    built = sorted(p.name for p in tmp_path.glob("libtvm_*.a"))
    assert built == sorted(f"libtvm_{name}.a" for name in manifest.libraries)
    for name in manifest.libraries:
        members = subprocess.run(
            [ar, "t", str(tmp_path / f"libtvm_{name}.a")],
            capture_output=True, text=True, check=True,
        ).stdout.split()
        expected = [s.with_suffix(".o").name for s in manifest.library_sources(name)]
        assert sorted(members) == sorted(expected), name


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("libary x src/a.c\n", "unknown entry"),
        ("library x\n", "at least one item"),
        ("library x src/a.c\nlibrary x src/a.c\n", "given twice"),
        ("library x src/a.c # the a\n", "lines of their own"),
        ("library x src/a.c\nproject p x y\n", "unknown libraries y"),
        ("library x src/a.c\nheaders y src/a.h\n", "headers of unknown library 'y'"),
        ("library x src/a.c\nheaders x src/a.h\nheaders x src/b.h\n", "given twice"),
    ],
)
def test_reader_rejects_malformed_manifests(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "libraries.txt").write_text(text)
    with pytest.raises(CrtManifestError, match=message):
        read_manifest(tmp_path)


def test_reader_resolves_globs_and_reports_unmatched_ones(tmp_path: Path) -> None:
    (tmp_path / "src" / "a").mkdir(parents=True)
    (tmp_path / "src" / "a" / "one.c").write_text("")
    (tmp_path / "src" / "a" / "two.c").write_text("")
    (tmp_path / "libraries.txt").write_text(
        "# comment\n\nlibrary a src/a/*.c\nlibrary b src/b/*.c\nproject p a\n"
    )
    manifest = read_manifest(tmp_path)
    assert manifest.library_sources("a") == [PurePosixPath("src/a/one.c"),
                                             PurePosixPath("src/a/two.c")]
    assert manifest.project_sources("p") == manifest.library_sources("a")
    with pytest.raises(CrtManifestError, match="matches no file"):
        manifest.library_sources("b")
    with pytest.raises(CrtManifestError, match="no library 'c'"):
        manifest.library_sources("c")
    with pytest.raises(CrtManifestError, match="no project type 'q'"):
        manifest.project_libraries("q")
    with pytest.raises(CrtManifestError, match="cannot read"):
        read_manifest(tmp_path / "missing")


def test_reader_resolves_private_headers(tmp_path: Path) -> None:
    (tmp_path / "src" / "a").mkdir(parents=True)
    for name in ("one.c", "a.h", "b.h"):
        (tmp_path / "src" / "a" / name).write_text("")
    (tmp_path / "src" / "b.c").write_text("")
    (tmp_path / "libraries.txt").write_text(
        "library a src/a/*.c\nheaders a src/a/*.h\nlibrary b src/b.c\nheaders b src/none/*.h\n"
    )
    manifest = read_manifest(tmp_path)
    assert manifest.library_headers("a") == [PurePosixPath("src/a/a.h"), PurePosixPath("src/a/b.h")]
    assert manifest.private_headers(["src/a/one.c"]) == manifest.library_headers("a")
    with pytest.raises(CrtManifestError, match="glob 'src/none/\\*.h' of headers 'b' matches no"):
        manifest.private_headers(["src/b.c"])
