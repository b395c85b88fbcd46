"""``project-api run`` and ``project-api demo``: run a model on a device from the host.

``run DIR`` opens an RPC session with the built project in DIR, feeds the inputs, runs the model
once, prints the outputs and times runs on the device. ``run --template T --model M`` does
generate + build + run in one go (a ``.tflite`` model is emitted to MLF first). ``demo`` runs the
bundled demo model on the host template (:func:`project_api.tools.demo.run_demo`).
"""

from __future__ import annotations

import argparse
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from project_api.cli.base import (
    Subcommand,
    UsageError,
    add_option_argument,
    add_retry_arguments,
    check_output_file,
    retry_policy,
    run_and_time,
)
from project_api.errors import ProjectError
from project_api.micro.timing import MAX_TIMING_NUMBER, MAX_TIMING_REPEAT
from project_api.system import extras

_LOG = logging.getLogger(__name__)

DEFAULT_SEED = 0
#: What recovery does for run and demo (their --retries help).
_RETRY_HOW = "reopen the session and go on with the inference where it stopped, or time again"


def _parse_inputs(items: list[str]) -> list[tuple[str, Path]]:
    pairs = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--input {item!r}: want NAME=FILE (FILE a .npy, or raw .bin bytes)")
        pairs.append((name, Path(path)))
    return pairs


def _find(tensors: list[Any], key: str, kind: str) -> tuple[int, Any]:
    for i, t in enumerate(tensors):
        if key in (t.name, t.c_name) or key == str(i):
            return i, t
    names = ", ".join(t.name for t in tensors)
    raise UsageError(f"the model has no {kind} {key!r}; its {kind}s: {names}")


def _check_npy_header(path: Path) -> None:
    """Refuse a .npy whose header promises more data than the file holds (before allocating)."""
    fmt = np.lib.format
    try:
        with open(path, "rb") as f:
            version = fmt.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = fmt.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _, dtype = fmt.read_array_header_2_0(f)
            else:
                return  # np.load reports what it makes of other versions
            data_start = f.tell()
    except (ValueError, EOFError, OSError, SyntaxError, TypeError) as exc:
        raise ProjectError(
            f"{path} is not a readable .npy file ({' '.join(str(exc).split()) or 'bad header'}); "
            "write it again with np.save"
        ) from None
    if dtype.hasobject:
        return  # np.load refuses it with allow_pickle=False, below
    want = math.prod(shape) * dtype.itemsize
    have = path.stat().st_size - data_start
    if have < want:
        raise ProjectError(
            f"{path} is truncated: its header says {dtype}{list(shape)} ({want} bytes of data) "
            f"but it holds {have}; write it again with np.save"
        )


def _read_npy(path: Path) -> np.ndarray:
    """``np.load`` of one .npy file, every way it can fail as a one-line ProjectError."""
    _check_npy_header(path)
    try:
        arr = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise ProjectError(
                f"{path} holds Python objects (a pickled object array), not numbers; save a "
                "numeric array, e.g. np.save(path, np.asarray(x, dtype=np.int8))"
            ) from None
        raise ProjectError(
            f"{path} is not a readable .npy file ({' '.join(str(exc).split())}); write it again "
            "with np.save"
        ) from None
    except (EOFError, OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise ProjectError(
            f"{path} is not a readable .npy file ({type(exc).__name__}: "
            f"{' '.join(str(exc).split()) or 'truncated'}); write it again with np.save"
        ) from None
    if not isinstance(arr, np.ndarray):  # an .npz under a .npy name
        if hasattr(arr, "close"):
            arr.close()
        raise ProjectError(f"{path} is an .npz archive, not one .npy array; save one array "
                           "per input with np.save")
    return arr


def _load_input(path: Path, tensor: Any, reshape: bool = False) -> np.ndarray:
    """An input array from ``.npy`` or raw ``.bin``, checked against the model's tensor.

    A ``.npy`` of another shape with the right number of elements is refused unless ``reshape``.
    """
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise ProjectError(f"input file {path} {what}; pass NAME=FILE with a .npy or raw .bin file")
    want = np.dtype(tensor.dtype)
    shape = tensor.require_shape()
    if path.suffix == ".npy":
        arr = _read_npy(path)
        if arr.dtype != want:
            raise ProjectError(
                f"{path} holds {arr.dtype}; input {tensor.name!r} wants {want} "
                f"(convert with arr.astype(np.{want.name}))"
            )
        if arr.size != int(np.prod(shape)):
            raise ProjectError(
                f"{path} holds shape {list(arr.shape)}; input {tensor.name!r} wants {list(shape)}"
            )
        if tuple(arr.shape) != tuple(shape) and not reshape:
            raise ProjectError(
                f"{path} holds shape {list(arr.shape)}; input {tensor.name!r} wants "
                f"{list(shape)} (same size): save it in that shape, or pass --reshape"
            )
        return arr.reshape(shape)
    data = path.read_bytes()
    if len(data) != tensor.size_bytes:
        raise ProjectError(
            f"{path} holds {len(data)} bytes; input {tensor.name!r} ({want}{list(shape)}) "
            f"needs exactly {tensor.size_bytes}"
        )
    return np.frombuffer(data, dtype=want).reshape(shape).copy()


def random_input(tensor: Any, rng: np.random.Generator) -> np.ndarray:
    """A deterministic stand-in input: full-range integers, or floats in [-1, 1)."""
    dtype = np.dtype(tensor.dtype)
    shape = tensor.require_shape()
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    if dtype.kind == "f":
        return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 1, size=shape, endpoint=True).astype(dtype)
    raise ProjectError(f"cannot make a random input of dtype {dtype} for {tensor.name!r}; pass --input")


def _summary(arr: np.ndarray, indent: int = 4) -> str:
    with np.printoptions(threshold=64, edgeitems=4, precision=6, suppress=True):
        return np.array2string(arr, prefix=" " * indent)


class RunCommand(Subcommand):
    NAMES = ["run"]
    HELP = "Run a model on the device of a built project (or generate+build+run in one go)."
    DESCRIPTION = (
        "Run the model of a built project on its device: set the inputs, run once, print the\n"
        "outputs and the device-measured time per run. Without --input, deterministic random\n"
        "inputs (seeded) are used. With --template and --model instead of DIR, the project is\n"
        "generated and built first (a .tflite model is emitted to MLF on the way)."
    )
    EPILOG = """\
examples:
  project-api run prj --input input_1=x.npy --output y.npz --repeat 3
  project-api run prj                      # seeded random inputs
  project-api run --template host --model model.tar
  project-api run --template host --model model.tflite --out work --check"""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("project_dir", nargs="?", help="a generated and built project")
        parser.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE",
                            help="an input: NAME (or index) = .npy file or raw .bin (repeatable)")
        parser.add_argument("--reshape", action="store_true",
                            help="accept a .npy input of another shape with the right number of "
                                 "elements (reshaped to the model's)")
        parser.add_argument("--output", metavar="FILE.npz",
                            help="save the outputs to exactly FILE (an .npz archive)")
        parser.add_argument("--module", default=None, help="model module name (default: the only one)")
        parser.add_argument("--repeat", type=_bounded("--repeat", MAX_TIMING_REPEAT), default=3,
                            help=f"timing rounds, 1..{MAX_TIMING_REPEAT} (default 3)")
        parser.add_argument("--number", type=_bounded("--number", MAX_TIMING_NUMBER), default=10,
                            help=f"runs per timing round, 1..{MAX_TIMING_NUMBER} (default 10)")
        parser.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                            help="wait at most SECONDS for each reply of the device, the whole "
                                 "timing measurement included (0: forever; default: the "
                                 "template's per-reply limit, and for timing a limit from one "
                                 "run measured first)")
        add_retry_arguments(parser, "step", how=_RETRY_HOW)
        parser.add_argument("--seed", type=_seed, default=DEFAULT_SEED,
                            help=f"seed of the random inputs, >= 0 (default {DEFAULT_SEED})")
        parser.add_argument("--force", action="store_true",
                            help="overwrite --output / replace --out if they exist")
        one_go = parser.add_argument_group("generate + build + run in one go")
        one_go.add_argument("--template", help="template name or directory (e.g. host)")
        one_go.add_argument("--model", help="model: MLF .tar or .tflite")
        one_go.add_argument("--out", help="where to keep the generated project (default: a "
                                          "temporary directory, removed afterwards)")
        one_go.add_argument("--check", action="store_true",
                            help="compare the outputs with TFLite Micro (.tflite only); for a "
                                 "model TFLite Micro cannot run (an operator it lacks, such as "
                                 "TILE) with LiteRT's reference kernels, and say so")
        add_option_argument(one_go)
        from project_api.cli.generate import add_input_spec_argument

        add_input_spec_argument(one_go)

    def invoke(self) -> int:
        a = self.args
        check_output_file(a.output, "--output", a.force, "y.npz")
        if a.project_dir and (a.template or a.model):
            raise UsageError("give either a project DIR or --template with --model, not both")
        if a.project_dir:
            if a.check or a.out:
                raise UsageError("--check and --out go with --template/--model")
            if getattr(a, "input_specs", None):
                raise UsageError("--input-spec goes with --template/--model (or 'generate'); "
                                 "a generated project's archive already records its facts")
            from project_api.api.project import GeneratedProject

            with GeneratedProject.from_directory(a.project_dir, debug=self.verbosity > 1) as project:
                if a.options:  # e.g. -o serial_url=... or -o labgrid_place=... for the session
                    from project_api.api.project import parse_option_assignments

                    project.override(parse_option_assignments(
                        a.options, project.project_options, project.where))
                return self._run(project, None)
        if not (a.template and a.model):
            raise UsageError("give a project DIR, or --template and --model to do it all in one go")
        return self._one_go()

    def _one_go(self) -> int:

        a = self.args
        model = Path(a.model)
        if not model.is_file():
            what = "is not a file" if model.exists() else "does not exist"
            raise ProjectError(f"model {model} {what}; pass an MLF .tar or a .tflite file")
        tflite = model.read_bytes() if model.suffix == ".tflite" else None
        if a.check and tflite is None:
            raise UsageError("--check needs a .tflite model: its reference is TFLite Micro")
        if a.check:
            extras.require("tflite_micro", "run --check (its reference is TFLite Micro)")
        with self.one_go_project(model, "project-api-run-") as project:
            return self._run(project, tflite)

    def _run(self, project: Any, tflite: bytes | None) -> int:
        from project_api.archive import mlf

        a = self.args
        mlf_path = project.info().get("model_library_format_path")
        if not mlf_path:
            raise ProjectError("the project's server reports no model archive; regenerate it")
        with mlf.open_mlf(mlf_path) as library:
            module = library.module(a.module)
        given = {}
        for key, path in _parse_inputs(a.input):
            idx, tensor = _find(module.inputs, key, "input")
            given[idx] = _load_input(path, tensor, reshape=bool(a.reshape))
        inputs = []
        rng = np.random.default_rng(a.seed)
        for i, tensor in enumerate(module.inputs):
            if i in given:
                inputs.append(given[i])
            else:
                inputs.append(random_input(tensor, rng))
        missing = [t.name for i, t in enumerate(module.inputs) if i not in given]
        if missing:
            self.progress(f"no --input for {', '.join(missing)}: using seeded random inputs "
                          f"(seed {a.seed})")

        self.progress("opening a session with the device")
        with project.session(debug=self.verbosity > 1, timeout_sec=a.timeout,
                             timeout_advice=self.timeout_advice,
                             retry=retry_policy(a)) as session:
            outputs, timing = run_and_time(session, module, inputs, a.number, a.repeat)
            recovery = session.recovery.stats if session.recovery.enabled else None

        status = 0
        check_lines: list[str] = []
        if a.__dict__.get("check") and tflite is not None:
            status, check_lines = _check(tflite, inputs, outputs)
        if a.output:
            _save_outputs(Path(a.output), {t.c_name: o for t, o in zip(module.outputs, outputs,
                                                                         strict=True)}, a.force)

        data = {
            "module": module.name,
            "inputs": {t.name: v.tolist() for t, v in zip(module.inputs, inputs, strict=True)},
            "outputs": {t.name: o.tolist() for t, o in zip(module.outputs, outputs, strict=True)},
            "seconds_per_run": list(timing.results),
            "check": check_lines or None,
            "recovery": recovery.to_json() if recovery is not None else None,
        }

        def text() -> str:
            lines = [f"model {module.name!r}:"]
            for t, o in zip(module.outputs, outputs, strict=True):
                lines.append(f"  output {t.name} {o.dtype}{list(o.shape)}:")
                lines.append("    " + _summary(o))
            lines.append(
                f"  device time per run: mean {timing.mean * 1e6:.2f} us, min "
                f"{timing.min * 1e6:.2f} us ({a.repeat} x {a.number} runs)"
            )
            lines += [f"  {c}" for c in check_lines]
            if recovery is not None and recovery.fault_count:
                lines.append(f"  link: {recovery.summary()}")
            if a.output:
                lines.append(f"  outputs saved to {a.output}")
            return "\n".join(lines)

        self.output(data, text)
        return status


def _bounded(flag: str, top: int) -> Any:
    """An argparse type: an integer in 1..top (the device time evaluator's limits)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} wants an integer; got {text!r}") from None
        if not 1 <= value <= top:
            raise argparse.ArgumentTypeError(
                f"{flag} {value} is out of range: the device's time evaluator takes 1..{top}"
            )
        return value

    return parse


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"--seed wants an integer >= 0; got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0 <= value < float("inf")):
        raise argparse.ArgumentTypeError(f"--timeout wants seconds >= 0 (0: forever); got {text!r}")
    return value


def _save_outputs(path: Path, arrays: dict[str, np.ndarray], force: bool) -> None:
    """Write ``arrays`` as an .npz to exactly ``path`` (np.savez would append .npz to a name)."""
    try:
        with open(path, "wb" if force else "xb") as f:
            np.savez(f, **arrays)
    except FileExistsError:
        raise ProjectError(f"{path} already exists; pass --force to overwrite it") from None


def _check(tflite: bytes, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> tuple[int, list[str]]:
    from project_api.emit import reference

    try:
        with reference._captured_fds() as printed:  # TFLM's C code says why it fails
            try:
                ref = reference.run_tflm(tflite, inputs)
            except (RuntimeError, ValueError, TypeError, IndexError, KeyError) as exc:
                failure: Exception | None = exc
            else:
                failure = None
    except OSError:  # no descriptors to redirect: run it plainly
        printed, failure = [], None
        try:
            ref = reference.run_tflm(tflite, inputs)
        except (RuntimeError, ValueError, TypeError, IndexError, KeyError) as exc:
            failure = exc
    said = "".join(printed)
    if said.strip():
        _LOG.debug("TFLite Micro printed:\n%s", said.rstrip())
    against = "TFLite Micro"
    if failure is not None:
        why = reference.tflm_failure_reason(said, failure)
        if isinstance(failure, reference.ReferenceArenaError):
            raise ProjectError(f"{failure}; run without --check (the device ran it)") from None
        if not reference.litert_ref_stands_in(why):
            raise ProjectError(f"TFLite Micro cannot run this model as the --check reference "
                               f"({why}); run without --check (the device ran it)") from None
        # TFLM lacks an operator (TILE) or refuses an operand it wants constant (FILL's dims
        # computed from shapes): LiteRT's reference kernels are the reference then
        try:
            ref = reference.run_litert(tflite, inputs, reference_kernels=True)
        except (ImportError, RuntimeError, ValueError) as exc:
            raise ProjectError(
                f"TFLite Micro cannot run this model as the --check reference ({why}), nor "
                f"LiteRT's reference kernels ({' '.join(str(exc).split())[:200]}); run without "
                "--check (the device ran it)") from None
        against = f"LiteRT's reference kernels (TFLite Micro cannot run this model: {why})"
    lines, status = [], 0
    for i, (got, want) in enumerate(zip(outputs, ref, strict=True)):
        if got.size != want.size:
            lines.append(f"check output {i} against {against}: MISMATCH (device shape "
                         f"{list(got.shape)}, reference shape {list(want.shape)})")
            status = 1
            continue
        got = got.reshape(want.shape)
        if want.dtype.kind == "f":
            ok = bool(np.allclose(got, want, rtol=1e-4, atol=1e-5))
        else:
            ok = bool(np.array_equal(got, want))
        diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if got.size else 0.0
        lines.append(f"check output {i} against {against}: {'OK' if ok else 'MISMATCH'} "
                     f"(max abs difference {diff:g})")
        status = status or (0 if ok else 1)
    return status, lines


class DemoCommand(Subcommand):
    NAMES = ["demo"]
    HELP = "Generate, build and run the bundled demo model on the host (no hardware needed)."
    DESCRIPTION = (
        "Build the bundled demo model, generate and build a host-template project for it, run it\n"
        "on the host device process and check the outputs: the int8 network (default) bit for\n"
        "bit against TensorFlow Lite Micro when the [reference] extra is installed, else against\n"
        "numpy's int8 evaluation with TFLM's arithmetic; the float32 MLP against numpy."
    )
    EPILOG = """\
examples:
  project-api demo
  project-api demo --model mlp --out demo-mlp
  project-api demo --out demo-out --json"""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--out", default="demo-out",
                            help="directory for the model and generated project (default demo-out; "
                                 "an earlier demo's folder is replaced)")
        parser.add_argument("--model", choices=["int8", "mlp"], default="int8",
                            help="int8: emitted CNN checked against TFLite Micro, or numpy "
                                 "without the [reference] extra (default); "
                                 "mlp: float32 MLP checked against numpy")
        parser.add_argument("--force", action="store_true",
                            help="replace --out even if an earlier demo did not write it")
        add_retry_arguments(parser, "step", how=_RETRY_HOW)
        parser.add_argument("--seed", type=_seed, default=DEFAULT_SEED, help="seed of weights and inputs (>= 0)")

    def invoke(self) -> int:
        from project_api.tools.demo import run_demo

        a = self.args
        result = run_demo(a.out, model=a.model, force=a.force, seed=a.seed, progress=self.progress)
        data = {
            "model": result.description,
            "project_dir": str(result.project_dir),
            "model_path": str(result.model_path),
            "inputs": {k: v.tolist() for k, v in result.inputs.items()},
            "outputs": [o.tolist() for o in result.outputs],
            "reference": [r.tolist() for r in result.reference],
            "reference_name": result.reference_name,
            "note": result.note,
            "max_abs_error": result.max_abs_error,
            "seconds_per_run": list(result.run_seconds),
            "ok": result.ok,
        }

        def text() -> str:
            ref = result.reference_name
            lines = [f"demo: {result.description}", f"  {'project:':<14}{result.project_dir}"]
            for i, (y, r) in enumerate(zip(result.outputs, result.reference, strict=True)):
                lines.append(f"  {f'output {i}:':<14}" + _summary(y, 16))
                lines.append(f"  {ref + ':':<14}" + _summary(r.reshape(y.shape), 16))
                info = result.output_info[i] if i < len(result.output_info) else None
                quant = getattr(info, "quantization", None)
                if quant and len(quant["scale"]) == 1:
                    real = (y.astype(np.float64) - quant["zero_point"][0]) * quant["scale"][0]
                    top = int(np.argmax(real))
                    lines.append(f"  dequantized: top class {top} (p = {real.reshape(-1)[top]:.3f})")
            verdict = "OK" if result.ok else "MISMATCH"
            lines.append(f"  max |device - {ref}| = {result.max_abs_error:.3g}: {verdict}")
            lines.append(f"  device time per run: best {min(result.run_seconds) * 1e6:.2f} us")
            if result.note:
                lines.append(f"  note: {result.note}")
            return "\n".join(lines)

        self.output(data, text)
        return 0 if result.ok else 1


COMMANDS = [RunCommand, DemoCommand]
