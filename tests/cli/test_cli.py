"""The ``project-api`` command end to end on tests/loopback_template.

Subprocess runs (``python -m project_api ...``) check the real exit statuses and streams; in-process
runs of ``main(argv)`` cover the rest quickly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from conftest import REPO_ROOT
from helpers.recording_template import write_recording_template
from mlf_factory import make_mlf

from project_api import cli
from project_api.cli.base import Subcommand

LOOPBACK = REPO_ROOT / "tests" / "loopback_template"


@pytest.fixture
def templates_root(tmp_path, monkeypatch) -> Path:
    """A templates dir with 'loopback', 'recording' and a folder that is not a template."""
    root = tmp_path / "templates"
    shutil.copytree(LOOPBACK, root / "loopback", ignore=shutil.ignore_patterns("__pycache__"))
    write_recording_template(root / "recording")
    (root / "stm32").mkdir(parents=True)  # no microtvm_api_server.py: not listed
    monkeypatch.setenv("PROJECT_API_TEMPLATES_DIR", str(root))
    return root


@pytest.fixture
def mlf(tmp_path) -> Path:
    return make_mlf(tmp_path / "model.tar", 7, extended=True)


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "project_api", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120)


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr, stderr
    line = lines[0]
    assert "; " in line, line  # "<what went wrong>; <what to do>"
    return line


# --- subprocess: the real command -----------------------------------------------------------------


def test_end_to_end_generate_info_build_flash(tmp_path, templates_root, mlf):
    out = tmp_path / "prj"
    r = run("generate", "--template", "loopback", "--model", str(mlf), "--out", str(out),
            "-o", "board=qemu_x86", "-o", "buffer_size_bytes=4096")
    assert r.returncode == 0, r.stderr
    assert f"generated {out}" in r.stdout and "platform loopback" in r.stdout
    assert "generating" in r.stderr and "INFO" not in r.stderr  # progress, no logs without -v
    assert (out / "model.tar").is_file() and (out / "board.txt").read_text() == "qemu_x86\n"

    r = run("info", str(out), "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["platform_name"] == "loopback" and info["is_template"] is False
    assert info["saved_options"] == {"board": "qemu_x86", "buffer_size_bytes": 4096,
                                     "transport": "rpc", "verbose": False}  # defaults kept too
    mod = info["model"]["modules"]["default"]
    assert [t["name"] for t in mod["inputs"]] == ["x"] and mod["inputs"][0]["shape"] == [1, 1]

    r = run("info", str(out))
    assert r.returncode == 0
    assert "generated project, platform loopback" in r.stdout
    assert "input 0: x  float32[1x1]  4 B" in r.stdout

    r = run("build", str(out), "--json")
    assert r.returncode == 0, r.stderr
    built = json.loads(r.stdout)
    assert built["step"] == "build" and built["options"]["board"] == "qemu_x86"
    assert "build:" in r.stderr and "done in" in r.stderr  # progress lines on stderr
    assert (out / "build" / "firmware.bin").read_text() == "qemu_x86\n"

    r = run("flash", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"flashed {out}"
    assert (out / "build" / "flashed").is_file()


def test_relative_paths(tmp_path, templates_root, mlf):
    """Relative --model/--out and DIR work from any cwd (servers run with the project as cwd)."""
    r = run("generate", "-t", "loopback", "-m", "model.tar", "--out", "rel/prj", "-o", "board=b",
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for verb in ("info", "build", "flash"):
        r = run(verb, "rel/prj", cwd=tmp_path)
        assert r.returncode == 0, (verb, r.stderr)
    assert (tmp_path / "rel" / "prj" / "build" / "flashed").is_file()


def test_existing_out_needs_force(tmp_path, templates_root, mlf):
    out = tmp_path / "prj"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    args = ["generate", "-t", str(LOOPBACK), "-m", str(mlf), "--out", str(out), "-o", "board=b"]
    r = run(*args)
    assert r.returncode == 1
    line = one_error_line(r.stderr)
    assert "already exists" in line and "--force" in line
    assert (out / "mine.txt").read_text() == "keep me"
    # Issue 35: --force replaces only a project this tool generated, never a folder of other files.
    r = run(*args, "--force")
    assert r.returncode == 1
    line = one_error_line(r.stderr)
    assert "no project generated by project-api" in line and "'mine.txt'" in line
    assert (out / "mine.txt").read_text() == "keep me"
    (out / "mine.txt").unlink()
    assert run(*args).returncode == 0
    (out / "stale.txt").write_text("from the last run")
    r = run(*args, "--force")
    assert r.returncode == 0, r.stderr
    assert not (out / "stale.txt").exists() and (out / "model.tar").is_file()
    assert not list(tmp_path.glob(".prj.project-api-lock"))


def test_concurrent_generate_force_one_folder(tmp_path, templates_root, mlf):
    """Issue 35: three generate --force into one folder at once: each run either makes the whole
    project or gets the lock's one line; the folder left is a project."""
    out = tmp_path / "prj"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    args = [sys.executable, "-m", "project_api", "generate", "-t", str(LOOPBACK), "-m", str(mlf),
            "--out", str(out), "-o", "board=b", "--force"]
    procs = [subprocess.Popen(args, stderr=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    for p in procs:
        p.stderr.close()
    assert any(rc == 0 for rc, _ in results), results
    for rc, err in results:
        if rc != 0:
            assert "is generating" in one_error_line(err), err
    assert (out / "microtvm_api_server.py").is_file() and (out / "model.tar").is_file()
    assert not list(tmp_path.glob(".prj.project-api-lock"))


@pytest.mark.parametrize(
    "options, expected",
    [
        (["-o", "bord=x"], "unknown option 'bord'"),
        (["-o", "board=x", "-o", "buffer_size_bytes=lots"], "expects an integer, got 'lots'"),
        (["-o", "board=x", "-o", "verbose=perhaps"], "expects a bool"),
        # The server checks the values (it is the authority) and says so in one line.
        (["-o", "board=x", "-o", "transport=carrier-pigeon"],
         "option transport='carrier-pigeon' is not one of rpc, fifo; pick one of those"),
        ([], "option board is required by generate_project; pass -o board=<value>"),
        (["-o", "board"], "is not NAME=VALUE"),
    ],
)
def test_option_errors_exit_2_with_one_line(tmp_path, templates_root, mlf, options, expected):
    out = tmp_path / "prj"
    r = run("generate", "--template", "loopback", "--model", str(mlf), "--out", str(out), *options)
    assert r.returncode == 2, r.stderr
    line = one_error_line(r.stderr)
    assert expected in line
    if "bord" in expected:
        assert "did you mean 'board'" in line
    assert not out.exists()


def test_usage_errors_exit_2(templates_root):
    r = run()
    assert r.returncode == 2 and "usage:" in r.stderr
    r = run("frobnicate")
    assert r.returncode == 2
    assert "invalid choice" in one_error_line(r.stderr)
    r = run("generate", "--template", "loopback")
    assert r.returncode == 2
    assert "required" in one_error_line(r.stderr)


def test_failures_exit_1_with_one_line(tmp_path, templates_root, mlf):
    r = run("generate", "--template", "lopback", "--model", str(mlf), "--out", str(tmp_path / "p"))
    assert r.returncode == 1
    assert "did you mean 'loopback'" in one_error_line(r.stderr)

    evil = tmp_path / "junk.tar"
    evil.write_bytes(b"not a tar" * 100)
    r = run("generate", "--template", "loopback", "--model", str(evil), "--out",
            str(tmp_path / "p"), "-o", "board=b")
    assert r.returncode == 1
    assert "not a readable tar" in one_error_line(r.stderr)
    assert not (tmp_path / "p").exists()

    r = run("build", str(tmp_path / "nowhere"))
    assert r.returncode == 1
    assert "nowhere" in one_error_line(r.stderr)

    # A server-side failure: flash before build. The server's reason reaches the one line.
    out = tmp_path / "prj"
    assert run("generate", "-t", "loopback", "-m", str(mlf), "--out", str(out), "-o", "board=b").returncode == 0
    r = run("flash", str(out))
    assert r.returncode == 1
    line = one_error_line(r.stderr)
    assert "run build first" in line


def test_generate_help_lists_template_options(templates_root):
    r = run("generate", "--template", "loopback", "--help")
    assert r.returncode == 0
    text = r.stdout
    assert "options of template 'loopback' (platform loopback)" in text
    for name in ("board", "transport", "buffer_size_bytes", "verbose"):
        assert f"\n  {name}  (" in text
    assert "choices: rpc, fifo" in text and "required for generate_project" in text
    assert "examples:" in text
    # Without --template the help says how to get them.
    r = run("generate", "--help")
    assert r.returncode == 0 and "add --template NAME" in r.stdout


def test_templates_lists_only_server_dirs(templates_root):
    r = run("templates", "--json")
    assert r.returncode == 0, r.stderr
    entries = json.loads(r.stdout)
    assert [e["name"] for e in entries] == ["loopback", "recording"]
    loop = entries[0]
    assert loop["platform"] == "loopback"
    assert {o["name"] for o in loop["options"]} == {"board", "transport", "buffer_size_bytes", "verbose"}
    r = run("templates")
    assert r.returncode == 0
    assert "loopback  platform loopback" in r.stdout and "stm32" not in r.stdout


def test_verbose_shows_logs(tmp_path, templates_root, mlf):
    out = tmp_path / "prj"
    r = run("generate", "-t", "loopback", "-m", str(mlf), "--out", str(out), "-o", "board=b",
            "-o", "verbose=true", "-v")
    assert r.returncode == 0, r.stderr
    assert "INFO" in r.stderr  # the template server's "generated ..." log, forwarded


def test_json_error_also_on_stdout(tmp_path, templates_root):
    r = run("info", str(tmp_path / "missing"), "--json")
    assert r.returncode == 2
    assert "does not exist" in json.loads(r.stdout)["error"]
    one_error_line(r.stderr)


# --- in-process main(argv) ------------------------------------------------------------------------


def test_main_in_process(tmp_path, templates_root, mlf, capsys):
    out = tmp_path / "prj"
    assert cli.main(["generate", "--template", "recording", "--model", str(mlf), "--out", str(out),
                     "-o", "project_type=standalone", "--json", "-q"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["platform"] == "recording" and data["options"]["workspace_size_bytes"] == 2048
    assert captured.err == ""  # -q: no progress

    assert cli.main(["build", str(out), "-o", "verbose=true"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == f"built {out}"
    build_calls = [json.loads(x) for x in (out / "calls.jsonl").read_text().splitlines()]
    assert build_calls[-1] == {"method": "build", "payload": {
        "project_type": "standalone", "verbose": True, "workspace_size_bytes": 2048,
        "serial_number": None, "fail_generate": False, "fail_build": False}}

    assert cli.main(["flash", str(out)]) == 2  # serial_number is required by flash
    assert "'serial_number' is required by flash" in one_error_line(capsys.readouterr().err)
    assert cli.main(["flash", str(out), "-o", "serial_number=X1"]) == 0
    capsys.readouterr()

    assert cli.main(["info", str(mlf)]) == 0
    text = capsys.readouterr().out
    assert "Model Library Format" in text and "MLF version 7" in text
    assert "input 0: x  float32[1x1]  4 B" in text

    assert cli.main(["info", str(templates_root / "recording")]) == 0
    assert "template project, platform recording" in capsys.readouterr().out


def test_generate_opens_the_archive_once_and_starts_no_project_server(
        tmp_path, templates_root, mlf, capsys, monkeypatch):
    """One pass over the data: ``generate`` reads the archive once (the notes, the check before
    the server sees it) and prints what it generated from the project's options file, without a
    second server for the new project."""
    from project_api.api import project as project_mod
    from project_api.archive import mlf as mlf_mod

    opened = []
    real_open = mlf_mod.open_mlf

    def counting_open(path, *args, **kwargs):
        opened.append(Path(path))
        return real_open(path, *args, **kwargs)

    def no_second_server(*args, **kwargs):
        raise AssertionError("generate started the generated project's server")

    monkeypatch.setattr(mlf_mod, "open_mlf", counting_open)
    monkeypatch.setattr(project_mod.GeneratedProject, "from_directory", no_second_server)
    out = tmp_path / "prj"
    assert cli.main(["generate", "-t", "loopback", "-m", str(mlf), "--out", str(out),
                     "-o", "board=b", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert opened == [mlf]
    assert data["platform"] == "loopback" and data["options"]["board"] == "b"
    assert data["options"]["buffer_size_bytes"] == 16 * 1024 * 1024  # the server's default


def test_server_failure_is_one_line_in_process(tmp_path, templates_root, mlf, capsys):
    out = tmp_path / "prj"
    assert cli.main(["generate", "-t", "recording", "-m", str(mlf), "--out", str(out),
                     "-o", "project_type=standalone", "-o", "fail_generate=true"]) == 1
    line = one_error_line(capsys.readouterr().err)
    assert "generation failed half-way" in line and "-v" in line
    assert not out.exists()


def test_every_verb_teaches_with_examples(templates_root, capsys):
    parser, table = cli.build_parser()
    for name in ("templates", "info", "generate", "build", "flash"):
        cls, sub = table[name]
        assert sub.epilog and "examples:" in sub.epilog and f"project-api {name}" in sub.epilog
        assert cli.main([name, "--help"]) == 0
        capsys.readouterr()


def test_registry_is_tolerant(monkeypatch):
    class HelloCommand(Subcommand):
        NAMES = ["hello"]
        HELP = "Say hello."

        def invoke(self) -> int:
            self.output({"hello": True}, "hello")
            return 0

    fake = types.ModuleType("project_api.cli.hello")
    HelloCommand.__module__ = fake.__name__
    fake.HelloCommand = HelloCommand
    monkeypatch.setitem(sys.modules, "project_api.cli.hello", fake)

    real_import = cli.importlib.import_module

    def import_module(name, *a):
        if name == "project_api.cli.broken":
            raise RuntimeError("boom at import")
        return real_import(name, *a)

    monkeypatch.setattr(cli.importlib, "import_module", import_module)
    commands = cli.load_commands(["templates", "hello", "not_written_yet", "broken"])
    names = [c.NAMES[0] for c in commands]
    assert names == ["templates", "hello", "broken"]  # a missing module is skipped

    monkeypatch.setattr(cli, "VERB_MODULES", ["templates", "hello", "not_written_yet", "broken"])
    monkeypatch.setattr(cli, "load_commands", lambda modules=None: commands)
    assert cli.main(["hello"]) == 0
    assert cli.main(["broken"]) == 1  # the verb exists and reports why it cannot run


def test_not_a_project_dir_gets_a_useful_hint(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["build", str(empty)]) == 1
    line = one_error_line(capsys.readouterr().err)
    assert "No Project API server found" in line and "project-api generate" in line


def test_main_leaves_logging_as_it_found_it(tmp_path, capsys):
    import logging

    root = logging.getLogger()
    before = (root.level, list(root.handlers))
    cli.main(["info", str(tmp_path / "missing")])
    cli.main(["info", str(tmp_path / "missing"), "-vv"])
    assert (root.level, list(root.handlers)) == before
    capsys.readouterr()


def test_builtin_templates_of_the_repo(monkeypatch, capsys):
    """The real templates dir: only folders with a server script are listed (host, ...)."""
    monkeypatch.delenv("PROJECT_API_TEMPLATES_DIR", raising=False)
    assert cli.main(["templates", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    names = [e["name"] for e in entries]
    assert "host" in names and set(names) <= {"host", "stm32", "zephyr", "riscv"}
    host = entries[names.index("host")]
    assert host.get("platform") == "host", host
    assert any(o["name"] == "workspace_size_bytes" and o["type"] == "int" for o in host["options"])


def test_emit_help_names_every_kernel_target(capsys):
    from project_api.emit.target import TARGET_NAMES

    assert cli.main(["emit", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    start = text.index("--target TARGET kernel target:")
    option = text[start:text.index("--weights {int8", start)]
    missing = [t for t in TARGET_NAMES if t not in option]
    assert not missing, f"emit --help's --target leaves out {missing}"
