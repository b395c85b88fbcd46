#!/usr/bin/env python3
"""The stm32 template on QEMU netduinoplus2 (STM32F405, ``-icount shift=0``): instructions per
inference, firmware size by part, UART link efficiency and the time from flash to a first result.

Each figure stands beside a baseline measured in the same run:

* instructions per inference of each shared model that fits the board, from ``session.time``
  (SysTick, which under ``-icount shift=0`` advances with the instruction count), calibrated
  against a loop of known length: a calibration model whose kernel runs ``subs; bne`` (two
  instructions per iteration) N times, timed the same way at two N; the slope gives device
  seconds per instruction, the loop's N=0 run is the executor's own overhead (the baseline).
  "ms @ 120 MHz" is instructions / 120e6, a proxy assuming one instruction per cycle;
* firmware flash and RAM by part (build/memory.json), beside the calibration firmware's;
* payload bytes over wire bytes (both directions, counted by a wrapping transport) for a 64 KiB
  int8 upload of random data, at 2 KiB packets and at the default (4 KiB), beside the
  framing-only bound; the target is >= 97 %;
* seconds from ``flash`` to the first inference result (QEMU start, ready line, handshake,
  model lookup, one inference), beside one warm inference round trip.

Usage: python bench/stm32.py [--models-dir DIR] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from mlf_kernels import Module, Tensor, write_mlf  # noqa: E402

from project_api.api.project import generate_project  # noqa: E402
from project_api.api.transport import Transport, WrappedTransport  # noqa: E402
from project_api.emit import emit  # noqa: E402
from project_api.emit.reference import run_tflm  # noqa: E402
from project_api.emit.target import for_cpu  # noqa: E402
from project_api.errors import ProjectAPIError  # noqa: E402
from project_api.micro import Session  # noqa: E402
from project_api.micro.framing import Framer  # noqa: E402
from project_api.system.paths import template_dir  # noqa: E402
from project_api.template.targets import board_cpu  # noqa: E402

_LOG = logging.getLogger("bench.stm32")
_OUT = logging.getLogger("bench.stm32.table")

BOARD = "qemu_netduinoplus2"
MODELS = ("hello_world_int8", "micro_speech_int8", "kws_ref_model_int8", "ad01_int8")
#: Loop iterations of the two calibration points (two instructions each).
CALIBRATION_N = (100_000, 1_100_000)
UPLOAD_BYTES = 64 * 1024
EFFICIENCY_TARGET = 0.97
PROXY_HZ = 120e6


def loop_module(name: str = "default") -> Module:
    """``y = n`` after a loop of ``n`` iterations of ``subs; bne`` (exactly 2n instructions)."""
    n, y = Tensor("n", "int32", (1,)), Tensor("y", "int32", (1,))
    src = f"""#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/c_backend_api.h"
#include <stdint.h>
#include "tvmgen_{name}.h"

TVM_DLL int32_t tvmgen_{name}_fused_loop(int32_t* p0, int32_t* T_out) {{
  uint32_t left = (uint32_t)p0[0];
  if (left != 0u) {{
    __asm volatile("1: subs %0, %0, #1\\n\\tbne 1b" : "+r"(left) : : "cc");
  }}
  T_out[0] = p0[0];
  return 0;
}}

int32_t tvmgen_{name}_run(struct tvmgen_{name}_inputs* inputs,
                          struct tvmgen_{name}_outputs* outputs) {{
  return tvmgen_{name}_fused_loop((int32_t*)inputs->n, (int32_t*)outputs->y);
}}
"""
    return Module(name, [n], [y], src, 0, [f"tvmgen_{name}_fused_loop"])


class CountingTransport(WrappedTransport):
    """Counts the bytes written and read through ``child``."""

    def __init__(self, child: Transport) -> None:
        super().__init__(child)
        self.written = 0
        self.read_bytes = 0

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        self.written += len(data)
        self.child.write(data, timeout_sec)

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        data = self.child.read(n, timeout_sec)
        self.read_bytes += len(data)
        return data


#: The emitter's kernels for the board's CPU, as `run --template stm32 --model x.tflite` picks.
KERNELS = for_cpu(board_cpu(template_dir("stm32"), BOARD))


def _build(mlf: Path, where: Path, **options: Any):
    return generate_project("stm32", mlf, where, {"board": BOARD, **options}, build=True)


def _per_run(session: Session, model, number: int) -> float:
    return min(session.time(model, number=number, repeat=3).results)


def calibrate(work: Path) -> dict[str, Any]:
    """Seconds per instruction (device timer) from the loop model, its overhead and its
    firmware size (default options); then the upload efficiency at 2 KiB packets and at the
    default (4 KiB), on loop firmware with a pool large enough for the 64 KiB tensor."""
    mlf = write_mlf(work / "loop.tar", [loop_module()])
    out: dict[str, Any] = {"upload": {}}
    with _build(mlf, work / "loop") as project:
        out["memory"] = json.loads((Path(project.directory) / "build/memory.json").read_text())
        project.flash()
        with project.session() as session:
            model = session.model()
            times = {}
            for n in (0, *CALIBRATION_N):
                model.set_input(0, np.array([n], dtype=np.int32))
                model.run()
                if int(model.get_output(0)[0]) != n:
                    raise ProjectAPIError(f"the loop model returned the wrong n for {n}")
                times[n] = _per_run(session, model, 3)
    n1, n2 = CALIBRATION_N
    spi = (times[n2] - times[n1]) / (2 * (n2 - n1))
    out["sec_per_instruction"] = spi
    out["overhead_instructions"] = times[0] / spi
    out["linearity"] = (times[n1] - times[0]) / (2 * n1) / spi
    for packet in (2048, None):  # microTVM's usual 2 KiB beside our default (4 KiB)
        options: dict[str, Any] = {"workspace_size_bytes": 96 * 1024}
        if packet:
            options["max_packet_size_bytes"] = packet
        with _build(mlf, work / f"upload-{packet or 'default'}", **options) as project:
            counting = CountingTransport(project.transport())
            counting.open()
            try:
                with Session(counting) as session:
                    limit = session.rpc.max_packet_bytes
                    out["upload"][limit] = upload(session, counting)
            finally:
                counting.close()
    return out


def upload(session: Session, counting: CountingTransport) -> dict[str, float]:
    """One 64 KiB int8 upload of random bytes: payload over wire bytes, both directions."""
    data = np.random.default_rng(3).integers(-128, 127, UPLOAD_BYTES, dtype=np.int8,
                                             endpoint=True).tobytes()
    tensor = session.empty((UPLOAD_BYTES,), "int8")
    written, read = counting.written, counting.read_bytes
    start = time.monotonic()
    session.rpc.copy_to_remote(tensor, data)
    seconds = time.monotonic() - start
    wire_out, wire_in = counting.written - written, counting.read_bytes - read
    back = session.rpc.copy_from_remote(tensor)
    if back != data:
        raise ProjectAPIError("the 64 KiB upload did not read back identical")
    session.rpc.free_data(tensor)
    # The bound with no RPC headers and no replies: one frame, escapes and frame bytes only.
    framing_only = UPLOAD_BYTES / len(Framer().frame(data))
    return {"efficiency": UPLOAD_BYTES / (wire_out + wire_in), "to_device": wire_out,
            "from_device": wire_in, "framing_only": framing_only, "seconds": seconds}


def bench_model(name: str, tflite: Path, work: Path, sec_per_instr: float) -> dict[str, Any]:
    emitted = emit(tflite, work / f"{name}.tar", name="default", target=KERNELS)
    try:
        project = _build(emitted.path, work / name)
    except ProjectAPIError as err:
        lines = [ln for ln in str(err).strip().splitlines() if ln.strip()]
        return {"model": name, "error": lines[-1] if lines else str(err)}
    with project:
        memory = json.loads((Path(project.directory) / "build/memory.json").read_text())
        rng = np.random.default_rng(5)
        xs = [rng.integers(np.iinfo(t.dtype).min, np.iinfo(t.dtype).max, t.shape,
                           dtype=t.dtype, endpoint=True) for t in emitted.inputs]
        start = time.monotonic()
        project.flash()
        flashed = time.monotonic()
        with project.session() as session:
            opened = time.monotonic()
            model = session.model()
            for k, x in enumerate(xs):
                model.set_input(k, x)
            model.run()
            got = model.get_output(0)
            first = time.monotonic()
            model.run()
            model.get_output(0)
            warm = time.monotonic() - first
            seconds = _per_run(session, model, 1 if name == "ad01_int8" else 3)
        want = run_tflm(tflite.read_bytes(), xs)[0]
        exact = bool(np.array_equal(got.reshape(want.shape), want))
    instructions = seconds / sec_per_instr
    return {"model": name, "memory": memory, "instructions": instructions,
            "ms_at_120mhz": instructions / PROXY_HZ * 1e3, "device_ms": seconds * 1e3,
            "bit_exact": exact, "flash_s": flashed - start, "open_s": opened - flashed,
            "first_result_s": first - start, "warm_inference_s": warm}


def _table(results: list[dict[str, Any]], cal: dict[str, Any]) -> list[str]:
    spi = cal["sec_per_instruction"]
    lines = [f"stm32 on QEMU {BOARD} (-icount shift=0), emitted with the {KERNELS.name} kernels "
             "(the board's CPU)", "",
             f"calibration: loop of 2n instructions, n = {CALIBRATION_N}: device timer "
             f"{spi * 1e9:.4f} ns/instruction ({1 / spi / 1e6:.1f} M instructions per device "
             f"second); small-n check {cal['linearity']:.4f} (1 = linear); "
             f"executor overhead (n = 0) {cal['overhead_instructions']:.0f} instructions", "",
             f"{'model':20} {'instructions':>13} {'ms@120MHz':>10} {'vs overhead':>12} "
             f"{'device ms':>10} {'bit-exact':>9}",
             f"{'(baseline: n=0 loop)':20} {cal['overhead_instructions']:13.0f} "
             f"{cal['overhead_instructions'] / PROXY_HZ * 1e3:10.4f} {'1x':>12} "
             f"{'':>10} {'':>9}"]
    for r in results:
        if "error" in r:
            continue
        lines.append(f"{r['model']:20} {r['instructions']:13.0f} {r['ms_at_120mhz']:10.3f} "
                     f"{r['instructions'] / cal['overhead_instructions']:11.0f}x "
                     f"{r['device_ms']:10.3f} {str(r['bit_exact']):>9}")
    for r in results:
        if "error" in r:
            lines.append(f"{r['model']}: does not fit: {r['error']}")
    parts = list(cal["memory"]["flash"])
    lines += ["", "firmware size by part, bytes (flash / RAM); baseline: the loop firmware",
              f"{'firmware':20} " + " ".join(f"{p[:12]:>14}" for p in parts) + f" {'total':>15}"]
    for label, mem in [("(baseline: loop)", cal["memory"])] + [
            (r["model"], r["memory"]) for r in results if "error" not in r]:
        cells = " ".join(f"{mem['flash'][p]:>6}/{mem['ram'][p]:<7}" for p in parts)
        lines.append(f"{label:20} {cells} {sum(mem['flash'].values()):>7}/"
                     f"{sum(mem['ram'].values()):<7}")
    lines += ["", f"UART link efficiency, {UPLOAD_BYTES // 1024} KiB int8 upload of random "
                  f"data (target >= {EFFICIENCY_TARGET:.0%})",
              f"{'packet limit':>12} {'payload/wire':>13} {'to device':>10} {'from device':>12} "
              f"{'framing-only bound':>19} {'target':>7}"]
    for packet, u in cal["upload"].items():
        met = "met" if u["efficiency"] >= EFFICIENCY_TARGET else "missed"
        lines.append(f"{packet:>12} {u['efficiency']:13.2%} {u['to_device']:>10} "
                     f"{u['from_device']:>12} {u['framing_only']:19.2%} {met:>7}")
    lines += ["", "flash to first inference result, wall seconds (baseline: one warm "
                  "inference round trip)",
              f"{'model':20} {'flash':>7} {'QEMU+open':>10} {'first result':>13} {'warm':>9}"]
    for r in results:
        if "error" not in r:
            lines.append(f"{r['model']:20} {r['flash_s']:7.3f} {r['open_s']:10.3f} "
                         f"{r['first_result_s']:13.3f} {r['warm_inference_s']:9.4f}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", type=Path,
                        default=Path(os.environ.get("PROJECT_API_SHARED", REPO.parent / "shared"))
                        / "models")
    parser.add_argument("--keep", type=Path, help="keep the generated projects in this folder")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    logging.getLogger("project_api").setLevel(logging.WARNING)
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm", "make"):
        if shutil.which(tool) is None:
            _LOG.error("skip bench/stm32.py: %s is not installed", tool)
            return 1 if os.environ.get("CI") else 0
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-stm32-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        _LOG.info("calibrating (loop model, 64 KiB uploads)...")
        cal = calibrate(work)
        results = []
        for name in MODELS:
            tflite = args.models_dir / f"{name}.tflite"
            if not tflite.is_file():
                results.append({"model": name, "error": f"{tflite} is missing"})
                continue
            _LOG.info("%s...", name)
            results.append(bench_model(name, tflite, work, cal["sec_per_instruction"]))
        for line in _table(results, cal):
            _OUT.info("%s", line)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
