"""MLPerf Tiny data sets: the EnergyRunner's folder (``y_labels.csv`` and the ``.bin`` files it
names) or an ``.npz`` (``x``, ``y``), checked against the facts of the project's model before
anything is sent.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from project_api.errors import ProjectAPIError
from project_api.system import bounded
from project_api.tools.mlperftiny.device import MlperfTinyError


@dataclass
class Sample:
    """One data set entry: its name, true class and the inputs (windows) the device runs."""

    name: str
    label: int
    windows: list[bytes]


@dataclass
class ModelFacts:
    """What the runner checks inputs and labels against: the bytes one input may have, and
    the classes a true label may name (None: not known)."""

    input_bytes: tuple[int, ...]
    description: str
    classes: int | None = None
    classes_from: str = ""  #: where :attr:`classes` comes from, for messages
    #: Bytes of state the model keeps from one run to the next (0: stateless); the modes reset
    #: it before every sample unless told to carry it.
    state_size_bytes: int = 0


def model_facts(project_dir: str | Path) -> ModelFacts:
    """The input sizes the project's firmware takes (its input tensor's bytes and, for an int8
    input with quantization, float32 values, 4 bytes each, it quantizes itself), and the
    classes of its labels: the output's size for a classifier, 2 (normal, anomalous) for AD."""
    from project_api.archive import mlf
    from project_api.template import options as saved_options
    from project_api.template.mlperftiny_model import MLPERFTINY_MODELS, mlperftiny_version

    lib = mlf.open_mlf(Path(project_dir) / "model")
    mod = next(iter(lib.modules.values()))
    t = mod.inputs[0]
    sizes = [t.size_bytes]
    desc = f"{t.name} {t.dtype} {'x'.join(map(str, t.shape or ()))} ({t.size_bytes} bytes"
    if t.dtype == "int8" and t.quantization:
        sizes.append(4 * t.size_bytes)
        desc += f", or {4 * t.size_bytes} bytes of float32"
    classes, source = None, ""
    try:
        version = mlperftiny_version(mod, saved_options.load_options(Path(project_dir)).get(
            "mlperftiny_model"))
    except ProjectAPIError:
        version = None
    if version is not None and MLPERFTINY_MODELS.get(version) == "reconstruction":
        classes, source = 2, f"{version}: 0 normal, 1 anomalous"
    elif mod.outputs and mod.outputs[0].shape:
        classes = int(np.prod(mod.outputs[0].shape))
        source = f"the model's output {mod.outputs[0].name!r} has {classes} classes"
    return ModelFacts(tuple(sizes), desc + ")", classes, source,
                      int(getattr(mod, "state_size_bytes", 0) or 0))


def _split(data: bytes, facts: ModelFacts, where: str) -> list[bytes]:
    for size in facts.input_bytes:
        if len(data) == size:
            return [data]
    for size in sorted(facts.input_bytes, reverse=True):
        if len(data) > size and len(data) % size == 0:
            return [data[i:i + size] for i in range(0, len(data), size)]
    raise MlperfTinyError(f"{where} has {len(data)} bytes; the model's input is "
                          f"{facts.description}: refused before sending")


def load_dataset(path: str | Path, facts: ModelFacts) -> list[Sample]:
    """The samples of ``path``: a folder with ``y_labels.csv`` and ``.bin`` files (the
    EnergyRunner's layout: ``file,classes,class[,window bytes,stride bytes]``), or an ``.npz``
    with ``x`` (samples first; each sample's bytes are one input or several back to back, e.g.
    AD windows) and ``y`` (the true classes). Every input is checked against the model."""
    path = Path(path)
    samples: list[Sample] = []
    if path.is_dir():
        labels = path / "y_labels.csv"
        if not labels.is_file():
            raise MlperfTinyError(f"{path} holds no y_labels.csv (file,classes,class[,window,"
                                  "stride] per line)")
        folder = path.resolve()
        with labels.open(newline="") as f:
            for row_no, row in enumerate(_rows(f, labels), 1):
                if not row or not row[0].strip():
                    continue
                where = f"{labels}:{row_no}"
                if len(row) not in (3, 5):
                    raise MlperfTinyError(f"{where}: expected file,classes,class"
                                          f"[,window,stride], got {len(row)} fields: "
                                          f"{bounded.quote(','.join(row))}")
                name = row[0].strip()
                if "\x00" in name:
                    raise MlperfTinyError(f"{where}: file name {bounded.quote(name)} holds a NUL "
                                          "byte; no file can have that name")
                file = path / name
                if Path(name).is_absolute() or not file.resolve().is_relative_to(folder):
                    raise MlperfTinyError(f"{where}: {name!r} lies outside {path}; name the "
                                          "data files relative to the data folder, inside it")
                if not file.is_file():
                    raise MlperfTinyError(f"{where}: {file} does not exist")
                label = _label(row[2], where, facts)
                data = file.read_bytes()
                if len(row) == 5:
                    width = _whole(row[3], "window", where)
                    stride = _whole(row[4], "stride", where)
                    if width <= 0 or stride <= 0 or width > len(data):
                        raise MlperfTinyError(f"{labels}:{row_no}: window {width} / stride "
                                              f"{stride} do not fit {file.name} ({len(data)} "
                                              "bytes)")
                    windows = [data[s:s + width] for s in range(0, len(data) - width + 1, stride)]
                    for w in windows:
                        _split(w, facts, f"a window of {file.name}")
                else:
                    windows = _split(data, facts, file.name)
                samples.append(Sample(name, label, windows))
    elif path.suffix == ".npz" and path.is_file():
        with np.load(path) as z:
            if "x" not in z or "y" not in z:
                raise MlperfTinyError(f"{path} must hold arrays 'x' (inputs, samples first) and "
                                      f"'y' (true classes); it holds {sorted(z.files)}")
            x, y = z["x"], z["y"]
        if len(x) != len(y):
            raise MlperfTinyError(f"{path}: {len(x)} inputs but {len(y)} labels")
        for i in range(len(x)):
            data = np.ascontiguousarray(x[i]).astype(x.dtype.newbyteorder("<")).tobytes()
            label = _label(y[i], f"{path}: y[{i}]", facts)
            samples.append(Sample(f"sample {i}", label, _split(data, facts, f"sample {i}")))
    else:
        raise MlperfTinyError(f"{path} is neither a folder with y_labels.csv nor an .npz file")
    if not samples:
        raise MlperfTinyError(f"{path} holds no samples")
    return samples


def _rows(f: Any, labels: Path) -> Iterator[list[str]]:
    """The rows of y_labels.csv; a field over the csv module's limit (128 KiB) or a line that
    is no CSV is an MlperfTinyError naming the file and line."""
    reader = csv.reader(f)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except (csv.Error, UnicodeDecodeError) as exc:
            raise MlperfTinyError(f"{labels}:{reader.line_num}: not a line of "
                                  f"file,classes,class[,window,stride] ({exc})") from None
        yield row


def _whole(text: str, what: str, where: str) -> int:
    """An integer field of y_labels.csv, or MlperfTinyError quoting it."""
    try:
        return int(str(text).strip())
    except ValueError:
        raise MlperfTinyError(f"{where}: {what} {bounded.quote(text)} is not an integer; write "
                              "whole numbers "
                              "in y_labels.csv (file,classes,class[,window,stride])") from None


def _label(value: Any, where: str, facts: ModelFacts) -> int:
    """A true class: an integer among the model's classes (when known)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise MlperfTinyError(f"{where}: class {value!r} is not an integer; give each sample's "
                              "true class as a whole number")
    label = _whole(value, "class", where) if isinstance(value, str) else value
    if facts.classes is not None and not 0 <= label < facts.classes:
        raise MlperfTinyError(f"{where}: class {label} is not one of the model's classes 0.."
                              f"{facts.classes - 1} ({facts.classes_from}); fix the label")
    return label
