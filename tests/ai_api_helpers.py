"""Helpers of the ai_ API tests (tests/crt/test_ai_api.py, tests/templates/test_stm32_standalone.py)."""

from __future__ import annotations

import io
import json
import struct
import tarfile
from pathlib import Path

import numpy as np

from project_api.emit.reference import run_tflm

#: Per-channel quantization written into the micro_speech output's metadata (4 classes, axis 1).
PER_CHANNEL = {"scale": [0.00390625, 0.0078125, 0.01171875, 0.015625],
               "zero_point": [-128, -127, -126, -125], "axis": 1}


def with_per_channel_output(src: Path, dest: Path) -> Path:
    """A copy of MLF ``src`` whose first module's first output carries :data:`PER_CHANNEL`
    quantization in metadata.json (the C is unchanged: quantization is metadata)."""
    with tarfile.open(src) as tin, tarfile.open(dest, "w") as tout:
        for member in tin.getmembers():
            data = tin.extractfile(member).read() if member.isfile() else None
            if member.name.lstrip("./") == "metadata.json":
                meta = json.loads(data)
                main = next(iter(meta["modules"].values()))["memory"]["functions"]["main"][0]
                next(iter(main["outputs"].values()))["quantization"] = dict(PER_CHANNEL)
                data = json.dumps(meta).encode()
                member.size = len(data)
            tout.addfile(member, io.BytesIO(data) if data is not None else None)
    return dest


def scale_bits(scale: float) -> str:
    """How the firmware prints a float32 scale: its IEEE bits in hex."""
    return f"{struct.unpack('<I', struct.pack('<f', scale))[0]:08x}"


def parse_lines(text: str, prefix: str = "ai: ") -> dict[str, list[str]]:
    """``{kind: [rest of line, ...]}`` for the lines ``<prefix><kind> <rest>``."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith(prefix):
            kind, _, rest = line[len(prefix):].partition(" ")
            out.setdefault(kind, []).append(rest.strip())
    return out


def hex_of(lines: list[str], model: str, index: int = 0) -> bytes:
    """The bytes of ``<model> <index> <hex>`` among ``lines``."""
    for line in lines:
        fields = line.split()
        if fields[:2] == [model, str(index)]:
            return bytes.fromhex(fields[2])
    raise AssertionError(f"no line for {model} {index} in {lines}")


def check_against_tflm(tflite: Path, dtype: str, shape: tuple[int, ...], input_bytes: bytes,
                       output_bytes: bytes) -> None:
    """``output_bytes`` equal what TFLite Micro computes from ``input_bytes``."""
    x = np.frombuffer(input_bytes, dtype=dtype).reshape(shape)
    want = run_tflm(tflite.read_bytes(), [x])[0]
    assert output_bytes == want.tobytes(), (output_bytes.hex(), want.tobytes().hex())
