"""TemplateProject / GeneratedProject / generate_project against real server processes.

Templates: ``tests/loopback_template`` (rpc-core's echo device) and the *recording* ones of
``tests/helpers/recording_template.py``, whose servers append every call they receive to
``calls.jsonl`` beside themselves, so a test can prove what reached a server and what never did.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from conftest import REPO_ROOT
from helpers.recording_template import (
    calls,
    methods,
    write_library_template,
    write_recording_template,
)
from mlf_factory import make_mlf

from project_api.api import project as project_mod
from project_api.api.project import (
    OPTIONS_FILE,
    GeneratedProject,
    TemplateProject,
    generate_project,
    resolve_template,
)
from project_api.errors import (
    MLFError,
    NotATemplateProjectError,
    OptionError,
    OptionValueError,
    ProjectError,
    ServerError,
    TemplateProjectError,
)

LOOPBACK = REPO_ROOT / "tests" / "loopback_template"

@pytest.fixture
def recording(tmp_path) -> Path:
    return write_recording_template(tmp_path / "recording_template")


@pytest.fixture
def mlf(tmp_path) -> Path:
    return make_mlf(tmp_path / "model.tar", 7)


@pytest.fixture
def launched(monkeypatch):
    """Every client that project.py launches, to check that each server process ends."""
    clients = []
    real = project_mod._launch

    def spy(directory, debug):
        client = real(directory, debug)
        clients.append(client)
        return client

    monkeypatch.setattr(project_mod, "_launch", spy)
    return clients


def _exited(client) -> bool:
    proc = client.process
    return client.is_shutdown and (proc is None or proc.poll() is not None)


def test_generate_build_flash_with_defaults(tmp_path, recording, mlf, launched):
    out = tmp_path / "prj"
    with generate_project(recording, mlf, out, {"project_type": "standalone"}) as prj:
        # The template server was stopped before generate_project returned.
        assert len(launched) == 2 and _exited(launched[0]) and not _exited(launched[1])
        gen = [c for c in calls(recording) if c["method"] == "generate_project"]
        assert len(gen) == 1
        assert gen[0]["payload"]["options"] == {
            "project_type": "standalone", "verbose": False, "workspace_size_bytes": 2048,
            "serial_number": None, "fail_generate": False, "fail_build": False}
        assert gen[0]["payload"]["project_dir"] == str(out.absolute())
        assert Path(gen[0]["payload"]["crt"]) == project_mod.paths.crt_dir()
        assert prj.platform_name == "recording"
        assert prj.info()["is_template"] is False
        prj.build()
        with pytest.raises(OptionError, match="'serial_number' is required by flash"):
            prj.flash()
        prj.options = {**prj.options, "serial_number": "ABC123"}
        prj.flash()
    assert all(_exited(c) for c in launched)
    # The generated server received full options, saved ones included.
    build, flash = [c for c in calls(out) if c["method"] in ("build", "flash")]
    assert build["payload"]["project_type"] == "standalone" and build["payload"]["verbose"] is False
    assert flash["payload"]["serial_number"] == "ABC123"
    assert json.loads((out / OPTIONS_FILE).read_text()) == {"project_type": "standalone"}


def test_bad_options_are_rejected_before_any_call(tmp_path, recording, mlf):
    out = tmp_path / "prj"
    cases = [
        ({"project_type": "standalone", "workspace_size": 1}, "did you mean 'workspace_size_bytes'"),
        ({}, "'project_type' is required by generate_project"),
        ({"project_type": "standalone", "verbose": "yes"}, "expects a bool"),
        ({"project_type": "standalone", "workspace_size_bytes": True}, "expects an integer"),
        ({"project_type": "other"}, "not one of its choices"),
    ]
    with TemplateProject.from_directory(recording) as tpl:
        for options, message in cases:
            with pytest.raises(OptionError, match=message):
                tpl.generate_project_from_mlf(mlf, out, options)
    assert "generate_project" not in methods(recording)
    assert not out.exists()


def test_existing_project_dir_needs_force(tmp_path, recording, mlf):
    out = tmp_path / "prj"
    out.mkdir()
    (out / "keep.txt").write_text("user data")
    with pytest.raises(ProjectError, match="already exists; .*--force"):
        generate_project(recording, mlf, out, {"project_type": "standalone"})
    assert (out / "keep.txt").read_text() == "user data"
    assert "generate_project" not in methods(recording)
    with generate_project(recording, mlf, out, {"project_type": "standalone"}, force=True):
        pass
    assert not (out / "keep.txt").exists() and (out / "model.tar").is_file()


def test_force_refuses_to_remove_a_directory_holding_the_inputs(tmp_path, recording):
    model = make_mlf(tmp_path / "work" / "model.tar", 7)
    with pytest.raises(ProjectError, match="holds the input"):
        generate_project(recording, model, tmp_path / "work", {"project_type": "standalone"},
                         force=True)
    assert model.is_file()


def test_failed_generation_removes_the_half_generated_dir(tmp_path, recording, mlf, launched):
    out = tmp_path / "prj"
    with pytest.raises(ServerError) as info:
        generate_project(recording, mlf, out, {"project_type": "standalone", "fail_generate": True})
    assert "generation failed half-way" in str(info.value.data)
    assert "generate_project" in methods(recording)  # the server did start writing ...
    assert not out.exists()  # ... and what it wrote is gone
    assert all(_exited(c) for c in launched)


def test_unsafe_mlf_is_refused_before_the_server_sees_it(tmp_path, recording):
    import io
    import tarfile

    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(MLFError, match=r"'\.\.'"):
        generate_project(recording, evil, tmp_path / "prj", {"project_type": "standalone"})
    assert "generate_project" not in methods(recording)
    assert not (tmp_path / "prj").exists()


def test_mlf_directory_is_packed_for_the_server(tmp_path, recording):
    mlf_dir = make_mlf(tmp_path / "mlf_dir", 6, as_dir=True)
    with generate_project(recording, mlf_dir, tmp_path / "prj", {"project_type": "host_driven"}):
        pass
    from project_api.archive.mlf import open_mlf

    with open_mlf(tmp_path / "prj" / "model.tar") as lib:
        assert lib.version == 6 and list(lib.modules) == ["default"]


def test_template_vs_generated_checks(tmp_path, recording, mlf):
    with generate_project(recording, mlf, tmp_path / "prj", {"project_type": "standalone"}):
        pass
    with pytest.raises(NotATemplateProjectError, match="generated project, not a template"):
        TemplateProject.from_directory(tmp_path / "prj")
    with pytest.raises(TemplateProjectError, match="is a template"):
        GeneratedProject.from_directory(recording)


def test_saved_options_are_reused_and_overridable(tmp_path, recording, mlf):
    out = tmp_path / "prj"
    generate_project(recording, mlf, out, {"project_type": "standalone", "verbose": True}).close()
    with GeneratedProject.from_directory(out) as prj:
        assert prj.options["verbose"] is True and prj.options["project_type"] == "standalone"
    with GeneratedProject.from_directory(out, {"verbose": False}) as prj:
        prj.build()
    assert calls(out)[-1]["payload"]["verbose"] is False
    with pytest.raises(OptionError, match="did you mean 'verbose'"):
        GeneratedProject.from_directory(out, {"verbos": True})


def test_server_error_in_build_propagates_and_server_stays_usable(tmp_path, recording, mlf):
    with generate_project(recording, mlf, tmp_path / "prj",
                          {"project_type": "standalone"}) as prj:
        prj.options = {**prj.options, "fail_build": True}
        with pytest.raises(ServerError, match="calling method build") as info:
            prj.build()
        assert "compiler exploded" in info.value.data["traceback"]
        prj.options = {**prj.options, "fail_build": False}
        prj.build()


def test_resolve_template_by_name_path_and_typo(tmp_path, monkeypatch):
    root = tmp_path / "templates"
    write_recording_template(root / "host")
    (root / "stm32").mkdir()  # no server script: not a template
    monkeypatch.setenv("PROJECT_API_TEMPLATES_DIR", str(root))
    assert resolve_template("host") == root / "host"
    assert resolve_template(str(root / "stm32")) == root / "stm32"
    with pytest.raises(ProjectError, match="no template 'hots'.*did you mean 'host'.*built-in templates: host"):
        resolve_template("hots")
    assert list(project_mod.builtin_templates()) == ["host"]


# --- loopback template: the transport -----------------------------------------------------------


@pytest.mark.parametrize("kind", ["rpc", "fifo"])
def test_loopback_transport_roundtrip(tmp_path, mlf, kind, launched):
    with generate_project(LOOPBACK, mlf, tmp_path / "prj", {"board": "qemu", "transport": kind}) as prj:
        prj.build()
        prj.flash()
        assert (tmp_path / "prj" / "build" / "firmware.bin").read_text() == "qemu\n"
        payload = bytes(range(256)) * 4
        with prj.transport() as transport:
            transport.write(payload, 5.0)
            got = b""
            while len(got) < len(payload):
                got += transport.read(len(payload) - len(got), 5.0)
            assert got == payload
            assert transport.timeouts().session_start_timeout_sec == 5.0
        # Closing the transport left the project's server running.
        assert not _exited(launched[-1])
        prj.build()
    assert all(_exited(c) for c in launched)


def test_debug_transport_hex_dumps(tmp_path, mlf, caplog):
    with generate_project(LOOPBACK, mlf, tmp_path / "prj", {"board": "b"}) as prj:
        with caplog.at_level(logging.INFO):
            with prj.transport(debug=True) as transport:
                transport.write(b"hello", 1.0)
                assert transport.read(5, 1.0) == b"hello"
    text = caplog.text
    assert "opening transport" in text and "closing transport" in text
    assert "68 65 6c 6c 6f" in text and "hello" in text


def test_session_is_built_lazily_over_the_transport(tmp_path, mlf):
    from project_api.api.transport import ProjectTransport
    from project_api.micro import Session

    with generate_project(LOOPBACK, mlf, tmp_path / "prj", {"board": "b"}) as prj:
        session = prj.session(name="unit")
        assert isinstance(session, Session)
        assert isinstance(session.transport, ProjectTransport)
        assert session.name == "unit"


def test_loopback_required_board(tmp_path, mlf):
    """Our template library's server checks the options itself: the client sends only what it
    was given, and the server's one line names the missing option."""
    with pytest.raises(OptionValueError, match="option board is required by generate_project; "
                                               "pass -o board=<value>"):
        generate_project(LOOPBACK, mlf, tmp_path / "prj", {})
    assert not (tmp_path / "prj").exists()


def test_tvm_style_entry_points(tmp_path, recording, mlf):
    """microTVM's spellings: TemplateProject(client) and generate_project_from_mlf(t, p, m, o)."""
    from project_api.api.client import instantiate_from_dir
    from project_api.api.project import generate_project_from_mlf

    with TemplateProject(instantiate_from_dir(recording)) as tpl:
        assert tpl.platform_name == "recording" and tpl.info()["is_template"] is True
    with generate_project_from_mlf(recording, tmp_path / "prj", mlf,
                                   {"project_type": "standalone"}) as prj:
        assert GeneratedProject(prj.client).options["workspace_size_bytes"] == 2048
        client = instantiate_from_dir(tmp_path / "prj")
        with pytest.raises(NotATemplateProjectError):
            TemplateProject(client)
        client.shutdown()


# --- servers of our template library check the options themselves ------------------------------


def test_library_server_is_sent_only_what_the_user_gave(tmp_path, mlf):
    """Our client sends a server that says it fills in defaults (``fills_defaults``) only the
    given options, so a default given again is kept: a project generated with level=3 builds
    with level=1 when -o level=1 is given (the server used to drop a value equal to the default
    and keep 3), and with the saved 3 when nothing is given."""
    template = write_library_template(tmp_path / "library")
    out = tmp_path / "prj"
    with TemplateProject.from_directory(template) as tpl:
        assert tpl.checks_options
        tpl.generate(mlf, out, {"level": 3})
    with GeneratedProject.from_directory(out) as prj:
        assert prj.options["level"] == 3  # the saved one, as the server wrote it
        prj.build()
        prj.override({"level": 1})
        prj.build()
    sent = [c["payload"] for c in calls(out) if c["method"] == "build"]
    ran = [c["payload"]["level"] for c in calls(out) if c["method"] == "build_values"]
    assert sent == [{}, {"level": 1}] and ran == [3, 1]


def test_project_types_come_from_the_server(tmp_path):
    """require_link reads the server's own table of project types (server_info_query), so a
    template's type names need not be microTVM's."""
    info = {"is_template": False, "platform_name": "typed", "fills_defaults": True,
            "project_options": [{"name": "project_type", "type": "str", "choices": ["rpc_fw",
                                                                                   "files"],
                                 "optional": ["generate_project"], "help": "h"}],
            "project_types": {"rpc_fw": {"link": "rpc"}, "files": {"link": None}}}
    prj = GeneratedProject(object(), {}, tmp_path / "p", info, saved={"project_type": "files"})
    with pytest.raises(ProjectError, match=r"p is a files project \(project_type=files\): its "
                                           r"firmware has no link to the host, and 'run' and "
                                           r"'validate' need the RPC protocol; generate the "
                                           r"project again with -o project_type=rpc_fw$"):
        prj.require_link("rpc")
    GeneratedProject(object(), {}, tmp_path / "p", info,
                     saved={"project_type": "rpc_fw"}).require_link("rpc")
