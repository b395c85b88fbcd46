"""Flashing without a probe attached: the stm32 boards as the flash runners get them, a minimal
Arm ELF image built in code, pyOCD's Python API replaced by mocks (golden calls), and the stm32
server's Handler on a generated-project directory."""

from __future__ import annotations

import importlib.util
import json
import struct
import sys
from pathlib import Path
from typing import Any
from unittest import mock

from project_api.system import paths
from project_api.template.boards import read_boards

BOARDS = read_boards(paths.template_dir("stm32") / "boards.yaml")
F429 = {"name": "nucleo_f429zi", **BOARDS["nucleo_f429zi"]}
L4R5 = {"name": "nucleo_l4r5zi", **BOARDS["nucleo_l4r5zi"]}
QEMU = {"name": "qemu_netduinoplus2", **BOARDS["qemu_netduinoplus2"]}
TEXT = bytes(range(256)) * 4  # the image's flash contents at 0x08000000
DATA = b"initial .data"  # a second segment loaded at the end of the text, as .data is


def arm_elf(path: Path, segments: list[tuple[int, bytes]]) -> Path:
    """A minimal ELF32 Arm executable with one PT_LOAD per ``(address, bytes)``."""
    phoff, phentsize = 52, 32
    offset = phoff + phentsize * len(segments)
    headers, blobs = b"", b""
    for addr, data in segments:
        headers += struct.pack("<8I", 1, offset + len(blobs), addr, addr, len(data), len(data),
                               5, 4)
        blobs += data
    ident = b"\x7fELF\x01\x01\x01" + bytes(9)
    elf = ident + struct.pack("<HHIIIIIHHHHHH", 2, 40, 1, segments[0][0] | 1, phoff, 0,
                              0x05000200, 52, phentsize, len(segments), 40, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(elf + headers + blobs)
    return path


def fake_probe(unique_id: str, description: str = "STM32 STLink") -> mock.Mock:
    """A debug probe as pyOCD lists it."""
    return mock.Mock(unique_id=unique_id, description=description)


class PyOcdMocks:
    """pyOCD's ConnectHelper, Session and FileProgrammer replaced by mocks."""

    def __init__(self, probes: list, flash_contents: dict[int, bytes] | None = None):
        self.list = mock.patch("pyocd.core.helpers.ConnectHelper.get_all_connected_probes",
                               return_value=probes)
        self.session_cls = mock.MagicMock(name="Session")
        self.session = self.session_cls.return_value
        self.session.__enter__.return_value = self.session
        contents = flash_contents or {0x08000000: TEXT, 0x08000000 + len(TEXT): DATA}
        self.session.target.read_memory_block8.side_effect = \
            lambda addr, size: list(contents[addr][:size])
        self.programmer_cls = mock.MagicMock(name="FileProgrammer")

    def __enter__(self) -> PyOcdMocks:
        self.list_mock = self.list.start()
        self.patches = [mock.patch("pyocd.core.session.Session", self.session_cls),
                        mock.patch("pyocd.flash.file_programmer.FileProgrammer",
                                   self.programmer_cls)]
        for p in self.patches:
            p.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.patches:
            p.stop()
        self.list.stop()


def stm32_handler(project: Path, board: str) -> Any:
    """The stm32 server's Handler on a generated-project directory with ``image`` built."""
    spec = importlib.util.spec_from_file_location(
        "stm32_server_for_flash_tests", paths.template_dir("stm32") / "microtvm_api_server.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    (project / "model.tar").write_bytes(b"")  # marks a generated project
    (project / "project_options.json").write_text(json.dumps({"board": board}))
    return module.Handler(project)
