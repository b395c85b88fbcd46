"""Where the time goes: per-operator device time of a profile build, as ``project-api profile``
shows it.

A profile build (``emit --profile``, or ``generate -o profile=true``) keeps the ticks of every
operator of its last run in a static table (:mod:`project_api.template.profile_build`). Through one RPC
session :func:`profile_session` runs the model ``repeat`` times, reads the table after each run
(the device's ``project_api.tools.profile``), subtracts the hooks' overhead the device measured, and
times the whole model with the device's time evaluator in the same session, so the per-operator
times can be checked against the whole. :func:`parse_log` reads the same records from what a
standalone firmware printed (``ai: profile <model> 0 <hex>`` lines).

The layers (operator, kernel kind, MACs) come from the archive's ``metadata.json``
(:mod:`project_api.emit.layers`). An archive TVM compiled has no per-operator hooks: its report
holds the whole-model time only and says why (:attr:`ProfileReport.note`).

On an emulated STM32 board (QEMU under ``-icount shift=0``, whose virtual clock advances one
nanosecond per instruction) every figure is also a count of instructions.
"""

from __future__ import annotations

import logging
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from project_api.emit.layers import Layer
from project_api.errors import ProjectError, SessionError
from project_api.template.profile_build import ProfileRecord, parse_record

__all__ = ["PROFILE_FUNCTION", "OpTime", "ProfileReport", "build_report", "instructions_per_second",
           "module_layers", "parse_log", "profile_session"]

_LOG = logging.getLogger(__name__)

#: The device's global function that answers a profile build's record.
PROFILE_FUNCTION = "project_api.profile"
#: QEMU's virtual clock under ``-icount shift=0``: one instruction per nanosecond.
ICOUNT_INSTRUCTIONS_PER_SECOND = 1e9


@dataclass(frozen=True)
class OpTime:
    """One operator's device time, over the repeats (overhead subtracted)."""

    position: int
    node: int
    op: str
    kernel: str
    macs: int
    seconds: float  #: median over the repeats
    min_seconds: float
    max_seconds: float
    share: float  #: of the whole model's time
    instructions: float | None = None  #: on an emulator that counts them

    @property
    def macs_per_us(self) -> float | None:
        return self.macs / (self.seconds * 1e6) if self.macs and self.seconds > 0 else None

    @property
    def macs_per_instruction(self) -> float | None:
        if not self.macs or not self.instructions:
            return None
        return self.macs / self.instructions

    @property
    def instructions_per_mac(self) -> float | None:
        if not self.macs or not self.instructions:
            return None
        return self.instructions / self.macs

    def to_json(self) -> dict[str, Any]:
        return {"position": self.position, "node": self.node, "op": self.op,
                "kernel": self.kernel, "macs": self.macs, "us": self.seconds * 1e6,
                "min_us": self.min_seconds * 1e6, "max_us": self.max_seconds * 1e6,
                "share": self.share, "instructions": self.instructions,
                "macs_per_us": self.macs_per_us,
                "macs_per_instruction": self.macs_per_instruction,
                "instructions_per_mac": self.instructions_per_mac}


@dataclass
class ProfileReport:
    """What ``project-api profile`` shows."""

    module: str
    repeats: int
    ops: list[OpTime]
    #: The whole model per run, timed by the device's time evaluator (median of its rounds).
    whole_seconds: float
    #: The profile build's own span of the last runs, first hook to last (median).
    span_seconds: float | None = None
    #: Hook overhead inside each operator's interval, subtracted from every operator.
    overhead_seconds: float = 0.0
    ticks_per_second: int = 0
    instructions_per_second: float | None = None
    #: Why there is no per-operator table (a TVM archive, a plain build), or None.
    note: str | None = None
    outputs: list[np.ndarray] = field(default_factory=list, repr=False)
    #: The unprofiled build's whole-model time (``--baseline``), or None.
    baseline_seconds: float | None = None
    #: The records read from the device, one per profiled run.
    records: list[ProfileRecord] = field(default_factory=list, repr=False)

    @property
    def sum_seconds(self) -> float:
        return sum(o.seconds for o in self.ops)

    @property
    def unattributed_seconds(self) -> float:
        """The whole minus the operators: the entry point's own work (workspace, glue,
        executor) and the part of the hooks outside the operators' intervals."""
        return self.whole_seconds - self.sum_seconds

    @property
    def baseline_change(self) -> float | None:
        """(profiled - unprofiled) / unprofiled whole-model time, with a baseline."""
        if self.baseline_seconds is None or self.baseline_seconds <= 0:
            return None
        return (self.whole_seconds - self.baseline_seconds) / self.baseline_seconds

    def instructions(self, seconds: float) -> float | None:
        return seconds * self.instructions_per_second if self.instructions_per_second else None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "module": self.module, "repeats": self.repeats,
            "ops": [o.to_json() for o in self.ops],
            "whole_us": self.whole_seconds * 1e6,
            "sum_us": self.sum_seconds * 1e6 if self.ops else None,
            "unattributed_us": self.unattributed_seconds * 1e6 if self.ops else None,
            "span_us": self.span_seconds * 1e6 if self.span_seconds is not None else None,
            "overhead_us_per_op": self.overhead_seconds * 1e6,
            "ticks_per_second": self.ticks_per_second,
            "instructions_per_second": self.instructions_per_second,
            "whole_instructions": self.instructions(self.whole_seconds),
            "note": self.note,
            "baseline_us": self.baseline_seconds * 1e6 if self.baseline_seconds else None,
            "baseline_change": self.baseline_change,
        }
        return data


def module_layers(metadata: Mapping[str, Any], module: str) -> list[Layer] | None:
    """The layers an archive of our emitter records for ``module`` (None: not recorded, e.g.
    an archive TVM wrote)."""
    entry = (metadata.get("modules") or {}).get(module) or {}
    raw = entry.get("layers")
    if not isinstance(raw, list):
        return None
    return [Layer.from_json(x) for x in raw]


def instructions_per_second(project_dir: Path, platform: str,
                            options: Mapping[str, Any]) -> float | None:
    """Instructions per second of device time, where the device counts instructions: the
    stm32 template's emulated boards run under QEMU ``-icount shift=0`` (its boards.yaml says
    ``emulated``). None elsewhere."""
    if platform != "stm32":
        return None
    boards = Path(project_dir) / "boards.yaml"
    if not boards.is_file():
        return None
    import yaml

    board = (yaml.safe_load(boards.read_text()).get("boards") or {}).get(options.get("board"))
    return ICOUNT_INSTRUCTIONS_PER_SECOND if board and board.get("emulated") else None


def build_report(module: str, records: Sequence[ProfileRecord], layers: list[Layer] | None,
                 whole_seconds: float, *, instructions_rate: float | None = None,
                 note: str | None = None) -> ProfileReport:
    """Per-operator times from the records of several runs (the median of each operator, its
    overhead subtracted and floored at 0) against the whole-model time."""
    if not records:
        return ProfileReport(module, 0, [], whole_seconds,
                             instructions_per_second=instructions_rate, note=note)
    hz = records[0].ticks_per_second
    if hz <= 0:
        raise SessionError(f"the profile build of {module!r} reports a counter of {hz} ticks "
                           "per second; its port's TVMCrtPlatform_CycleFrequencyHz is wrong")
    nodes = [n for n, _ in records[0].ticks]
    for r in records:
        if [n for n, _ in r.ticks] != nodes or r.ticks_per_second != hz:
            raise SessionError(f"the profile records of {module!r} disagree from run to run "
                               "(another firmware answered?); flash the project again")
    overhead = statistics.median(r.overhead_ticks for r in records)
    by_node = {layer.node: layer for layer in layers or []}
    ops = []
    for i, node in enumerate(nodes):
        samples = [max(0.0, r.ticks[i][1] - overhead) / hz for r in records]
        layer = by_node.get(node)
        seconds = statistics.median(samples)
        ops.append(OpTime(
            position=layer.position if layer else i, node=node,
            op=layer.op if layer else "?", kernel=layer.kernel if layer else "?",
            macs=layer.macs if layer else 0, seconds=seconds, min_seconds=min(samples),
            max_seconds=max(samples), share=seconds / whole_seconds if whole_seconds > 0 else 0.0,
            instructions=seconds * instructions_rate if instructions_rate else None))
    span = statistics.median(r.total_ticks for r in records) / hz
    return ProfileReport(module, len(records), ops, whole_seconds, span, overhead / hz, hz,
                         instructions_rate, note, records=list(records))


def _why_whole_only(module: Any, layers: list[Layer] | None) -> str:
    if layers is None:
        return (f"module {module.name!r} was not compiled by project-api emit (TVM's fused "
                "functions call no per-operator hook), so only the whole model is timed")
    return (f"module {module.name!r} is not a profile build, so only the whole model is timed; "
            "emit it with --profile (or generate with -o profile=true) for per-operator times")


def profile_session(session: Any, module: Any, metadata: Mapping[str, Any],
                    inputs: Sequence[np.ndarray], *, repeat: int = 3, number: int = 10,
                    instructions_rate: float | None = None) -> ProfileReport:
    """Profile ``module`` (a :class:`project_api.archive.mlf.ModuleInfo`) through an open ``session``:
    ``repeat`` runs on ``inputs``, each followed by a read of the device's table, then the whole
    model timed by the device (``repeat`` rounds of ``number`` runs)."""
    layers = module_layers(metadata, module.name)
    model = session.model(module.name)
    for i, value in enumerate(inputs):
        model.set_input(i, value)
    records: list[ProfileRecord] = []
    note = None
    if module.profile:
        model.run()  # warm-up: the first run after boot touches cold memory
        for _ in range(repeat):
            model.run()
            raw = session.call(PROFILE_FUNCTION, module.name)
            if not isinstance(raw, bytes | bytearray):
                raise SessionError(f"{PROFILE_FUNCTION} returned {raw!r}, not bytes")
            try:
                records.append(parse_record(bytes(raw)))
            except ValueError as exc:
                raise SessionError(f"{PROFILE_FUNCTION} of {module.name!r}: {exc}") from None
    else:
        model.run()
        note = _why_whole_only(module, layers)
    outputs = [model.get_output(i) for i in range(len(module.outputs))]
    timing = session.time(model, number=number, repeat=repeat)
    report = build_report(module.name, records, layers, timing.median,
                          instructions_rate=instructions_rate, note=note)
    report.outputs = outputs
    return report


_LOG_LINE = re.compile(r"^ai: profile (\S+) \d+ ([0-9a-f]+)\s*$", re.M)


def parse_log(text: str, module: str | None = None) -> dict[str, list[ProfileRecord]]:
    """The profile records a standalone firmware printed (``ai: profile <model> 0 <hex>``, one
    per run), by model; only ``module``'s with it given. ProjectError when there are none."""
    found: dict[str, list[ProfileRecord]] = {}
    for m in _LOG_LINE.finditer(text):
        if module is not None and m.group(1) != module:
            continue
        try:
            found.setdefault(m.group(1), []).append(parse_record(bytes.fromhex(m.group(2))))
        except ValueError as exc:
            raise ProjectError(f"a profile line of model {m.group(1)!r} is corrupt ({exc}); "
                               "capture the firmware's output again") from None
    if not found:
        which = f" of model {module!r}" if module else ""
        raise ProjectError(f"no profile line{which} ('ai: profile MODEL 0 HEX') in the output; "
                           "build the standalone project from a profile build (emit --profile "
                           "or -o profile=true)")
    return found
