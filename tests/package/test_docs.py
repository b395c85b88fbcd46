"""The manual: ``docs/`` builds with ``mkdocs build --strict``, the README links every page and
stays short, and every shell block of the README and the pages is run or parsed here.

Each command of a ``sh`` block is checked for what it is: a ``project-api`` command line is
parsed by the command's own argument parser (so every verb and option it shows exists), a
``make`` line names a target of the Makefile, and any other program must be one the manual is
known to use (a new one is a decision to make here, not something that slips in). The commands
that are cheap and need no file (``templates``, ``ops``, ``--version``) are also run.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT, missing

DOCS = REPO_ROOT / "docs"
README = REPO_ROOT / "README.md"
PAGES = sorted(p for p in DOCS.glob("*.md") if p.name != "index.md")
MAX_README_LINES = 250
#: Programs other than project-api and make that the manual's shell blocks may run.
KNOWN_PROGRAMS = {
    "apt-get", "sudo", "pip", "python", "python3", "cd", "west", "ser2net", "labgrid-client",
    "labgrid-coordinator", "labgrid-exporter", "export", "mkdir", "cp", "ls", "cat", "unzip",
    "tar", "git", "scripts/setup.sh", "qemu-system-arm", "pyocd", "esptool.py", "openocd",
    "mkdocs", "echo", "source", "arm-none-eabi-size", "xxd",
}
PROJECT_API = ("project-api", ".venv/bin/project-api")


def shell_blocks(path: Path) -> list[tuple[int, str]]:
    """The ``sh`` blocks of a Markdown file: (line of the fence, text)."""
    blocks, lines = [], path.read_text().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() in ("```sh", "```bash", "```shell"):
            start, body = i + 1, []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            blocks.append((start, "\n".join(body)))
        i += 1
    return blocks


def commands(block: str) -> list[list[str]]:
    """Each simple command of a block: continuations joined, comments dropped, split at
    ``&&``, ``||``, ``;`` and ``|``."""
    text = re.sub(r"\\\n\s*", " ", block)
    out = []
    heredoc = None  # the end word of a here-document being skipped (its body is data)
    for line in text.splitlines():
        if heredoc is not None:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        if (m := re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)):
            heredoc = m.group(1)
            line = line[:m.start()]
        words = [w.lstrip("(").rstrip(")") for w in shlex.split(line, comments=True)]
        current: list[str] = []
        for w in [*words, ";"]:
            if w in ("&&", "||", ";", "|"):
                if current:
                    out.append(current)
                current = []
            else:
                current.append(w)
    return out


def _all_commands() -> list[tuple[str, list[str]]]:
    found = []
    for path in [README, *PAGES, DOCS / "index.md"]:
        for line, block in shell_blocks(path):
            for argv in commands(block):
                found.append((f"{path.relative_to(REPO_ROOT)}:{line}", argv))
    return found


def _make_targets() -> set[str]:
    text = (REPO_ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z][\w-]*):", text, re.M))


def test_every_shell_command_of_the_manual_is_known_and_parses() -> None:
    from project_api.cli import build_parser

    parser, _ = build_parser()
    targets = _make_targets()
    checked, bad = 0, []
    for where, argv in _all_commands():
        while argv and re.fullmatch(r"[A-Z_]+=\S*", argv[0]):  # VAR=value cmd
            argv = argv[1:]
        if not argv:
            continue
        program = argv[0]
        if program in PROJECT_API or argv[:3] in (["python", "-m", "project_api"],
                                                  [".venv/bin/python", "-m", "project_api"]):
            args = argv[1:] if program in PROJECT_API else argv[3:]
            if args in (["--version"], ["--help"], ["-h"]):
                continue
            try:
                parser.parse_args(args)
            except SystemExit as exc:  # --help of a verb
                assert exc.code == 0, (where, argv)
            except Exception as exc:  # noqa: BLE001 - the message names the option
                bad.append(f"{where}: {' '.join(argv)}: {exc}")
        elif program == "make":
            wanted = [a for a in argv[1:] if not a.startswith("-") and "=" not in a]
            if not set(wanted) <= targets:
                bad.append(f"{where}: make {' '.join(wanted)}: no such target")
        elif Path(program).name in ("python", "python3"):
            # python -m pytest PATHS / python bench/x.py: the files it names exist
            paths = [a.split("::")[0] for a in argv[1:]
                     if a.startswith(("tests/", "bench/", "scripts/")) or a.endswith(".py")]
            for rel in paths:
                if not (REPO_ROOT / rel).exists():
                    bad.append(f"{where}: {' '.join(argv)}: no {rel}")
        elif program.startswith(("bench/", "scripts/", ".ci/")):
            if not (REPO_ROOT / program).is_file():
                bad.append(f"{where}: {' '.join(argv)}: no {program}")
        elif Path(program).name not in KNOWN_PROGRAMS:
            bad.append(f"{where}: {' '.join(argv)}: {program!r} is not a program the manual is "
                       "known to use (add it to KNOWN_PROGRAMS if it is meant)")
        checked += 1
    assert not bad, "\n".join(bad)
    assert checked > 40, checked  # the manual shows this many commands at least


@pytest.mark.parametrize("args", [["templates"], ["ops"], ["--version"]])
def test_cheap_commands_of_the_manual_run(args: list[str]) -> None:
    shown = {tuple(argv[1:]) for _, argv in _all_commands() if argv[0] in PROJECT_API}
    assert tuple(args) in shown, f"the manual no longer shows project-api {' '.join(args)}"
    out = subprocess.run([sys.executable, "-m", "project_api", *args], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()


def test_readme_is_short_and_links_every_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_README_LINES
    for page in PAGES:
        assert f"](docs/{page.name})" in text, f"README does not link docs/{page.name}"
    nav = (REPO_ROOT / "mkdocs.yml").read_text()
    for page in [*PAGES, DOCS / "index.md"]:
        assert f": {page.name}\n" in nav, f"mkdocs.yml's nav lacks {page.name}"


def test_manual_builds_strict(tmp_path: Path) -> None:
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        missing("mkdocs is not installed; run 'make setup' (it is in the test extra)")
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                          "-f", str(REPO_ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "site" / "stm32" / "index.html").is_file()
