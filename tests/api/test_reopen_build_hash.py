"""The firmware's build hash, checked by every session of a local project (issue 21, item 3):
``GeneratedProject.session`` refuses a device whose firmware reports another build hash than
the project's ``build_hash.txt`` at open, and again after every reopen (a board that came back
with other firmware); a firmware that reports none is accepted; a caller's own ``verify``
replaces the check. On the host template, whose device is a process the server starts."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import require_tool
from mlf_kernels import add_mlf, device_pids, generate_host_project

import project_api.api.project as project_mod
from project_api.api.project import (
    BuildHashMismatchError,
    GeneratedProject,
    check_build_hash,
    project_build_hash,
)
from project_api.errors import SessionError
from project_api.template import glue

SHAPE = (1, 4)


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``prj`` (open, built) and ``other`` (built from the same archive with another workspace
    size, so its firmware reports another build hash)."""
    require_tool("make")
    require_tool("cc")
    tmp = tmp_path_factory.mktemp("reopen_build_hash")
    archive = add_mlf(tmp / "add.tar", dtype="int8", shape=SHAPE)
    generate_host_project(archive, tmp / "other", workspace_size_bytes=1 << 17).close()
    project = generate_host_project(archive, tmp / "prj")
    yield {"project": project, "prj": tmp / "prj", "other": tmp / "other"}
    project.close()


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """Every build hash a device reported to the check (project.device_build_hash counted)."""
    seen: list[str | None] = []
    real = project_mod.device_build_hash

    def counting(session: Any) -> str | None:
        seen.append(real(session))
        return seen[-1]
    monkeypatch.setattr(project_mod, "device_build_hash", counting)
    return seen


def _add(session: Any) -> None:
    """One inference that must be right (the session works)."""
    a = np.arange(4, dtype=np.int8).reshape(SHAPE)
    model = session.model("default")
    model.set_input("a", a)
    model.set_input("b", a)
    model.run()
    assert np.array_equal(model.get_output(0), a + a)


def _fix(prj: Path) -> str:
    return f"flash the project onto it ('project-api build {prj}', then 'project-api flash {prj}')"


def test_the_projects_differ(projects: dict[str, Any]) -> None:
    ours, theirs = (project_build_hash(projects[k]) for k in ("prj", "other"))
    assert ours and theirs and ours != theirs


def test_a_session_checks_the_build_hash_and_works(projects: dict[str, Any],
                                                   counted: list[str | None]) -> None:
    with projects["project"].session() as session:
        _add(session)
    assert counted == [project_build_hash(projects["prj"])]


def test_other_firmware_is_refused_at_open(projects: dict[str, Any],
                                           counted: list[str | None]) -> None:
    """The project's build_hash.txt says one thing, the device another: one line naming both
    and the fix, and the device process is stopped again."""
    prj = projects["prj"]
    hash_file = prj / glue.BUILD_HASH_FILE
    real = hash_file.read_text()
    wanted = "0123456789abcde"
    hash_file.write_text(wanted + "\n")
    try:
        with pytest.raises(BuildHashMismatchError) as info:
            projects["project"].session().open()
    finally:
        hash_file.write_text(real)
    assert str(info.value) == (f"the device's firmware reports build hash {real.strip()}, the "
                               f"project's is {wanted}; {_fix(prj)}")
    assert (info.value.reported, info.value.expected) == (real.strip(), wanted)
    assert counted == [real.strip()]
    assert device_pids(prj / "build" / "main") == []


def test_the_check_runs_again_after_every_reopen(projects: dict[str, Any],
                                                 counted: list[str | None]) -> None:
    want = project_build_hash(projects["prj"])
    with projects["project"].session() as session:
        assert counted == [want]
        session.reopen(reason="a new session on the open link")
        assert counted == [want, want]
        session.reopen(restart=True, reason="the link reopened: a new device process")
        assert counted == [want, want, want]
        _add(session)


def test_a_device_that_came_back_with_other_firmware_is_refused(
        projects: dict[str, Any], counted: list[str | None]) -> None:
    """After a reopen that restarts the device, it runs the other project's firmware (its
    binary moved into place): the reopen is refused, naming both hashes."""
    prj, other = projects["prj"], projects["other"]
    ours, theirs = project_build_hash(prj), project_build_hash(other)
    binary = prj / "build" / "main"
    kept = prj / "build" / "main.ours"
    shutil.copy2(binary, kept)
    try:
        with projects["project"].session() as session:
            _add(session)
            incoming = prj / "build" / "main.theirs"
            shutil.copy2(other / "build" / "main", incoming)
            os.replace(incoming, binary)  # the running process keeps its own image
            with pytest.raises(BuildHashMismatchError) as info:
                session.reopen(restart=True, reason="the device restarted")
    finally:
        os.replace(kept, binary)
    assert str(info.value) == (f"the device's firmware reports build hash {theirs}, the "
                               f"project's is {ours}; {_fix(prj)}")
    assert counted == [ours, theirs]


def test_a_callers_verify_replaces_the_check(projects: dict[str, Any],
                                             counted: list[str | None]) -> None:
    project: GeneratedProject = projects["project"]
    calls: list[Any] = []
    with project.session(verify=calls.append) as session:
        session.reopen(reason="again")
    assert calls == [session, session] and counted == []
    with project.session(verify=None) as session:  # no check at all
        _add(session)
    assert counted == []


# --- the check itself, on a stand-in session --------------------------------------------------


class _Device:
    """A session whose device answers project_api.build_hash with ``value`` (None: its
    firmware has no such function)."""

    def __init__(self, value: int | None) -> None:
        self.value = value

    def call(self, name: str) -> int:
        assert name == project_mod.BUILD_HASH_FUNCTION
        if self.value is None:
            raise SessionError(f"no global function {name!r} on the device")
        return self.value


def test_a_firmware_without_a_build_hash_is_accepted_unless_required() -> None:
    assert check_build_hash(_Device(None), "0123456789abcde") is None
    with pytest.raises(BuildHashMismatchError) as info:
        check_build_hash(_Device(None), "0123456789abcde", require=True, subject="its firmware")
    # The farm's words for a place (validate --places), unchanged.
    assert str(info.value) == ("its firmware reports build hash none, the project's is "
                               "0123456789abcde; flash the project onto it")
    assert check_build_hash(_Device(0x0123456789ABCDE), "0123456789abcde") == "0123456789abcde"
    with pytest.raises(BuildHashMismatchError, match="reports build hash 000000000000001, "):
        check_build_hash(_Device(1), "0123456789abcde")


def test_a_project_without_a_build_hash_has_no_check(tmp_path: Path) -> None:
    assert project_build_hash(tmp_path) is None
    (tmp_path / glue.BUILD_HASH_FILE).write_text("not a hash\n")
    assert project_build_hash(tmp_path) is None
