"""The MLPerf Tiny benchmark's protocol as a test plays it: the golden transcript of a KWS run
(``tests/golden/mlperftiny/kws01.txt``: ``> command`` lines and the ``< reply`` lines they get),
the transcript of a live run (:class:`Transcript`, a :class:`~project_api.tools.mlperftiny.Device`
log), and the reference results from TFLite Micro. Shared by the host, stm32 and Zephyr tests of
project type mlperftiny."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np

from project_api.api.transport import Transport
from project_api.errors import IoTimeoutError
from project_api.tools.mlperftiny import DB_CHUNK_BYTES
from project_api.tools.references import tflm_outputs

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "mlperftiny" / "kws01.txt"
RESULTS = r"-?\d+\.\d{3}(?:,-?\d+\.\d{3})*"


def _pattern(line: str) -> re.Pattern[str]:
    text = re.escape(line).replace(re.escape("<N>"), r"\d+").replace(re.escape("<RESULTS>"),
                                                                      RESULTS)
    return re.compile(text + r"\Z")


def read_block(transport: Transport, buf: bytearray, timeout: float = 60.0) -> list[str]:
    """Raw reply lines up to and including m-ready; every line must end in \\r\\n."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while not lines or lines[-1] != "m-ready":
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            assert left > 0, f"no m-ready within {timeout} s; got {lines!r} {bytes(buf)!r}"
            try:
                buf += transport.read(4096, left)
            except IoTimeoutError:
                continue
        i = buf.index(b"\n")
        raw = bytes(buf[:i + 1])
        del buf[:i + 1]
        assert raw.endswith(b"\r\n"), f"line not ended by \\r\\n: {raw!r}"
        lines.append(raw[:-2].decode("ascii"))
    return lines


def golden_blocks() -> list[tuple[str | None, list[str]]]:
    """(command or None for start-up, expected lines) in transcript order."""
    blocks: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in GOLDEN.read_text().splitlines():
        if line.startswith("#") or not line:
            continue
        if line.startswith("> "):
            blocks.append((line[2:], []))
        elif line.startswith("< "):
            blocks[-1][1].append(line[2:])
        elif line == "<":
            blocks[-1][1].append("")
        else:
            raise AssertionError(f"bad golden line {line!r}")
    return blocks


def play_golden(transport: Transport, sample: bytes) -> list[list[float]]:
    """Play the transcript; return the values of every m-results line."""
    buf = bytearray()
    results: list[list[float]] = []
    for command, expected in golden_blocks():
        if command == "@input":
            chunks = [sample[i:i + DB_CHUNK_BYTES] for i in range(0, len(sample), DB_CHUNK_BYTES)]
            for k, chunk in enumerate(chunks):
                transport.write(b"db " + chunk.hex().encode() + b"%", 5.0)
                got = read_block(transport, buf)
                assert got == (["m-load-done", "m-ready"] if k == len(chunks) - 1
                               else ["m-ready"]), (k, got)
            continue
        if command is not None:
            transport.write(command.encode("ascii"), 5.0)
        got = read_block(transport, buf)
        assert len(got) == len(expected), f"after {command!r}: expected {expected!r}, got {got!r}"
        for want, line in zip(expected, got, strict=True):
            assert _pattern(want).match(line), f"after {command!r}: {line!r} is not {want!r}"
            if line.startswith("m-results-["):
                results.append([float(v) for v in line[len("m-results-["):-1].split(",")])
    return results


def tflm_results(tflite: Path, mlf, x: np.ndarray) -> list[str]:
    """TFLite Micro's int8 outputs for one input, dequantized in float32 as the firmware does
    and formatted like printf's %0.3f."""
    (out,) = tflm_outputs(tflite.read_bytes(), [x[None]])
    q = mlf.outputs[0].quantization
    scale, zero = np.float32(q["scale"][0]), int(q["zero_point"][0])
    values = scale * (out.reshape(-1).astype(np.int32) - zero).astype(np.float32)
    return [f"{float(v):.3f}" for v in values.astype(np.float32)]


class Transcript:
    """A :class:`~project_api.tools.mlperftiny.Device` ``log``: every command sent (with its ``%``)
    and every line received, in order, as ``(">" or "<", text)``."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, str]] = []

    def __call__(self, direction: str, text: str) -> None:
        self.entries.append((direction, text))

    @property
    def sent(self) -> list[str]:
        return [t for d, t in self.entries if d == ">"]

    @property
    def received(self) -> list[str]:
        return [t for d, t in self.entries if d == "<"]

    def count(self, prefix: str) -> int:
        """Commands sent that start with ``prefix``."""
        return sum(t.startswith(prefix) for t in self.sent)

    def commands(self) -> list[str]:
        """The commands sent, each cut to its first two words (``db`` data to ``db HEX``)."""
        out = []
        for t in self.sent:
            words = t.rstrip("%").split(" ")
            if words[0] == "db" and len(words) == 2 and words[1] not in ("crc", "print"):
                out.append("db HEX")
            else:
                out.append(" ".join(words[:3]))
        return out


def samples(mlf, n: int, seed: int) -> list[np.ndarray]:
    """``n`` int8 inputs for the module ``mlf`` (an EmitResult or ModuleInfo), drawn from ``seed``."""
    t = mlf.inputs[0]
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, t.shape, dtype=np.int8) for _ in range(n)]
