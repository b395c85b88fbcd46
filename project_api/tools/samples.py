"""The samples and references a validation runs on: arrays read from .npy, .npz and text files or
folders, bound to the model's tensors by name or position, checked finite and quantized where
asked.
"""

from __future__ import annotations

import io
import math
import re
import tokenize
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from project_api.errors import (
    ValidationError,
)
from project_api.system import bounded

if TYPE_CHECKING:
    pass



@dataclass(frozen=True)
class TensorSpec:
    """What validation needs to know of one model input or output."""

    name: str
    c_name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    scale: float | None = None  #: per-tensor quantization scale, when the model records one
    zero_point: int | None = None

    @classmethod
    def from_tensor_info(cls, info: Any) -> TensorSpec:
        """From an :class:`project_api.archive.mlf.TensorInfo`."""
        q = info.quantization or {}
        scales, zps = list(q.get("scale") or []), list(q.get("zero_point") or [])
        per_tensor = len(scales) == 1 and len(zps) == 1
        return cls(
            name=str(info.name), c_name=str(info.c_name), dtype=np.dtype(info.dtype),
            shape=tuple(int(s) for s in info.require_shape()),
            scale=float(scales[0]) if per_tensor else None,
            zero_point=int(zps[0]) if per_tensor else None,
        )

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def matches(self, key: str) -> bool:
        return key in (self.name, self.c_name)


def _squeeze(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(s) for s in shape if s != 1)


def _find_key(specs: Sequence[TensorSpec], key: str) -> int | None:
    for i, spec in enumerate(specs):
        if spec.matches(key):
            return i
    if key.isdigit() and int(key) < len(specs):
        return int(key)
    return None


def load_arrays(source: str | Path | Mapping[str, Any], what: str = "data") -> dict[str, np.ndarray]:
    """Arrays keyed by name from a mapping, an ``.npz`` file or a folder of ``.npy`` files."""
    if isinstance(source, Mapping):
        return {str(k): np.asarray(v) for k, v in source.items()}
    path = Path(source)
    if path.is_dir():
        files = sorted(path.glob("*.npy"))
        if not files:
            raise ValidationError(f"{what} folder {path} holds no .npy files; "
                                  "save one <input name>.npy per input (first axis = sample)")
        return {f.stem: _load_npy(f, what) for f in files}
    if not path.is_file():
        raise ValidationError(f"{what} {path} does not exist; pass an .npz file or a folder of .npy files")
    if path.suffix == ".npy":
        # One tensor, keyed by index: the only input (or output) of the model.
        return {"0": _load_npy(path, what)}
    try:
        _check_npz_headers(path, what)
        with np.load(path, allow_pickle=False) as npz:
            if not hasattr(npz, "files"):
                raise ValidationError(f"{what} {path} is not an .npz archive; "
                                      "write it with np.savez(path, name=array)")
            return {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError,
            RuntimeError) as err:
        # NotImplementedError / RuntimeError: zipfile's words for a damaged header that reads as
        # a zip feature it lacks ("zip file version 25.5", "compressed patched data (flag bit
        # 5)", "File ... is encrypted, password required").
        err = " ".join(str(err).split())[:200]
        raise ValidationError(f"{what} {path} cannot be read as an .npz ({err}); "
                              "write it with np.savez(path, name=array)") from None


def _check_npy_stream(f: Any, available: int, label: str, what: str) -> None:
    """Refuse a .npy header that declares more bytes than the file holds or than the limit
    allows, before anything is allocated for it."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = fmt.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, _, dtype = fmt.read_array_header_2_0(f)
        else:
            return  # np.load says what it makes of other versions
    except (ValueError, EOFError, OSError, SyntaxError, TypeError, tokenize.TokenError) as err:
        # numpy reads the header dict with Python's tokenizer: an unclosed bracket is a TokenError.
        raise ValidationError(f"{what} {label} cannot be read as a .npy "
                              f"({' '.join(str(err).split())[:200]}); write it with "
                              "np.save(path, array)") from None
    if dtype.hasobject:
        return  # refused by np.load(allow_pickle=False)
    available -= f.tell()
    want = math.prod(shape) * dtype.itemsize
    limit = bounded.env_limit("PROJECT_API_MAX_ARRAY_BYTES", bounded.DEFAULT_MAX_ARRAY_BYTES)
    if want > limit:
        raise ValidationError(
            f"{what} {label}: its header declares {dtype}{list(shape)} = {want} bytes, over the "
            f"limit of {limit}; raise PROJECT_API_MAX_ARRAY_BYTES if it is genuine")
    if want > available:
        raise ValidationError(
            f"{what} {label} is truncated: its header declares {want} bytes of data but it holds "
            f"{available}; write it again with np.save")


def _check_npz_headers(path: Path, what: str) -> None:
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                continue
            with archive.open(info) as f:
                head = f.read(65536 + 16)
            stream = io.BytesIO(head)
            _check_npy_stream(stream, info.file_size, f"{path}[{info.filename}]", what)


def check_source(source: str | Path, what: str = "data") -> None:
    """Before a project is generated, built or opened: ValidationError in one line when
    ``source`` (a ``--data`` or ``--reference`` path) does not exist, is neither a file nor a
    folder, holds nothing :func:`load_tensor_files` reads, or is a ``.npy``/``.npz`` whose
    headers do not read (headers only: no array is loaded). What the model makes of the arrays
    (names, shapes, dtypes) is checked when they are read, against the model."""
    path = Path(source)
    if not path.exists():
        raise ValidationError(f"{what} {path} does not exist; pass an .npz file, a folder of "
                              "<input name>.npy files, or one .npy, .txt or .h")
    if path.is_dir():
        try:
            files = sorted(f for f in path.iterdir() if f.suffix in (".npy", *_TEXT_SUFFIXES))
        except OSError as err:
            raise ValidationError(f"{what} folder {path} cannot be listed ({err.strerror}); "
                                  "check its permissions") from None
        if not files:
            raise ValidationError(f"{what} folder {path} holds no .npy, .txt or .h files; save "
                                  "one <input name>.npy per input (first axis = sample)")
    elif path.is_file():
        files = [path]
    else:
        raise ValidationError(f"{what} {path} is neither a file nor a folder; pass an .npz file "
                              "or a folder of .npy files")
    for f in files:
        try:
            if f.suffix == ".npy":
                with open(f, "rb") as stream:
                    _check_npy_stream(stream, f.stat().st_size, str(f), what)
            elif f.suffix in _TEXT_SUFFIXES:
                with open(f, "rb"):
                    pass
            else:
                _check_npz_headers(f, what)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError,
            RuntimeError) as err:
            kind = "an .npz" if f.suffix not in (".npy", *_TEXT_SUFFIXES) else f"a {f.suffix}"
            err_text = " ".join(str(err).split())[:200]
            raise ValidationError(f"{what} {f} cannot be read as {kind} ({err_text}); write it "
                                  "with np.savez(path, name=array) or np.save(path, array)") from None


def _load_npy(path: Path, what: str) -> np.ndarray:
    try:
        with open(path, "rb") as f:
            _check_npy_stream(f, path.stat().st_size, str(path), what)
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise ValidationError(f"{what} {path} cannot be read as a .npy ({err}); write it with "
                              "np.save(path, array)") from None


#: Text forms of one tensor: numbers, or a C array initializer (``int8_t x[] = {1, 2, };``).
_TEXT_SUFFIXES = (".txt", ".h", ".c")


def _number(word: str) -> float:
    """A decimal, hexadecimal (C ``0x1F``) or C float (``1.5f``) literal."""
    try:
        return float(int(word, 0))
    except ValueError:
        pass
    if word[-1:] in "fF" and not word.lower().startswith(("0x", "-0x")):
        word = word[:-1]
    return float(word)


def _load_text(path: Path, spec: TensorSpec, kind: str, what: str) -> np.ndarray:
    """Numbers separated by white space or commas (of a ``.h``/``.c``: those between the first
    ``{`` and the next ``}``), in C order, shaped by the model: one or more samples."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ValidationError(f"{what} {path} cannot be read ({err}); give a text file of "
                              "numbers") from None
    if path.suffix in (".h", ".c"):
        text = re.sub(r"//[^\n]*", " ", re.sub(r"/\*.*?\*/", " ", text, flags=re.S))
        start, end = text.find("{"), text.find("}", text.find("{") + 1)
        if start < 0 or end < 0:
            raise ValidationError(f"{what} {path} holds no C array initializer {{...}}; give "
                                  "the numbers between braces, e.g. int8_t x[] = {1, 2};")
        text = text[start + 1 : end]
    words = text.replace(",", " ").split()
    try:
        values = np.array([_number(w) for w in words], dtype=np.float64)
    except ValueError:
        bad = next(w for w in words if not _is_number(w))
        raise ValidationError(f"{what} {path} holds {bad!r}, not a number; give numbers "
                              "separated by white space or commas") from None
    per = math.prod(spec.shape)
    if not values.size or values.size % per:
        raise ValidationError(
            f"{what} {path} holds {values.size} numbers; {kind} {spec.name!r} is "
            f"{spec.dtype}{list(spec.shape)}, so give a multiple of {per} (one sample each)")
    if spec.dtype.kind in "iub":
        info = np.iinfo(spec.dtype) if spec.dtype.kind != "b" else None
        if not np.all(np.round(values) == values) or (
                info is not None and (values.min() < info.min or values.max() > info.max)):
            raise ValidationError(f"{what} {path} holds values that are not {spec.dtype} "
                                  f"integers; {kind} {spec.name!r} is {spec.dtype}")
    return values.astype(spec.dtype).reshape((values.size // per, *spec.shape))


def _is_number(word: str) -> bool:
    try:
        _number(word)
    except ValueError:
        return False
    return True


def _one_sample_or_many(arr: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """An array of exactly one sample's elements (any shape) gets its sample axis."""
    if arr.size == math.prod(spec.shape) and tuple(arr.shape[1:]) != spec.shape:
        return arr.reshape((1, *spec.shape))
    return arr


def load_tensor_files(source: str | Path | Mapping[str, Any], specs: Sequence[TensorSpec],
                      kind: str = "output", what: str = "reference") -> dict[str, np.ndarray]:
    """The arrays of ``source`` keyed by tensor (see the module doc for the forms): a mapping,
    ``.npz``, a folder of ``<name>.npy`` / ``.txt`` / ``.h``, or, for a model with one such
    tensor, a single ``.npy``, ``.txt`` or ``.h``. ``kind`` is "input" or "output"."""
    if isinstance(source, Mapping):
        return load_arrays(source, what)
    path = Path(source)
    single = path.is_file() and path.suffix in (".npy", *_TEXT_SUFFIXES)
    if single and len(specs) != 1:
        names = ", ".join(s.name for s in specs)
        raise ValidationError(
            f"{what} {path} is one {path.suffix} but the model has {len(specs)} {kind}s "
            f"({names}); give an .npz keyed by {kind} name or a folder of <{kind} name>.npy")
    if single and path.suffix in _TEXT_SUFFIXES:
        return {specs[0].name: _load_text(path, specs[0], kind, what)}
    if single:
        return {specs[0].name: _one_sample_or_many(_load_npy(path, what), specs[0])}
    if path.is_dir():
        arrays = {f.stem: _load_npy(f, what) for f in sorted(path.glob("*.npy"))}
        for f in sorted(f for f in path.iterdir() if f.suffix in _TEXT_SUFFIXES):
            i = _find_key(specs, f.stem)
            if i is None:
                raise ValidationError(f"{what} folder {path} has {f.name} but the model has no "
                                      f"{kind} {f.stem!r}; its {kind}s: "
                                      + ", ".join(s.name for s in specs))
            if f.stem in arrays:
                raise ValidationError(f"{what} folder {path} has two files for {f.stem!r} "
                                      f"({f.name} and another); keep one")
            arrays[f.stem] = _load_text(f, specs[i], kind, what)
        if not arrays:
            raise ValidationError(f"{what} folder {path} holds no .npy, .txt or .h files; save "
                                  f"one <{kind} name>.npy per {kind} (first axis = sample)")
        out = {}
        for key, arr in arrays.items():
            i = _find_key(specs, key)
            out[key] = _one_sample_or_many(arr, specs[i]) if i is not None else arr
        return out
    return load_arrays(path, what)


def load_reference(source: str | Path | Mapping[str, Any], specs: Sequence[TensorSpec],
                   what: str = "reference") -> dict[str, np.ndarray]:
    """A reference's arrays keyed by output: :func:`load_tensor_files` for outputs."""
    return load_tensor_files(source, specs, "output", what)


def _bind(specs: Sequence[TensorSpec], arrays: Mapping[str, np.ndarray], kind: str, what: str,
          samples: int | None) -> list[np.ndarray]:
    """Arrays of ``arrays`` in ``specs`` order, shaped ``(samples, *spec.shape)``, checked."""
    bound: dict[int, tuple[str, np.ndarray]] = {}
    names = ", ".join(s.name for s in specs)
    for key, arr in arrays.items():
        i = _find_key(specs, key)
        if i is None:
            raise ValidationError(f"{what} has an array {key!r} but the model has no {kind} by that "
                                  f"name; its {kind}s: {names}")
        if i in bound:
            raise ValidationError(f"{what} has two arrays for {kind} {specs[i].name!r} "
                                  f"({bound[i][0]!r} and {key!r}); keep one")
        bound[i] = (key, arr)
    for i, spec in enumerate(specs):
        if i not in bound:
            raise ValidationError(f"{what} has no array for {kind} {spec.name!r} (it has: "
                                  f"{', '.join(arrays) or 'none'}); add one keyed by {spec.name!r}")
    out: list[np.ndarray] = []
    counts: dict[str, int] = {}
    for i, spec in enumerate(specs):
        key, arr = bound[i]
        if arr.ndim == 0:
            raise ValidationError(f"{what} array {key!r} is a scalar; its first axis must be the "
                                  f"sample index, then {kind} {spec.name!r}'s shape {list(spec.shape)}")
        per_sample = tuple(arr.shape[1:])
        if per_sample != spec.shape and (math.prod(per_sample) != math.prod(spec.shape)
                                         or _squeeze(per_sample) != _squeeze(spec.shape)):
            raise ValidationError(
                f"{what} array {key!r} has shape {list(arr.shape)}, i.e. samples of "
                f"{list(per_sample)}; {kind} {spec.name!r} is {list(spec.shape)}, so give "
                f"[samples, {', '.join(map(str, spec.shape))}]"
            )
        if arr.dtype != spec.dtype:
            raise ValidationError(f"{what} array {key!r} holds {arr.dtype}; {kind} {spec.name!r} is "
                                  f"{_conversion_hint(arr.dtype, spec, kind)}")
        check_finite(arr, f"{what} array {key!r}")
        counts[key] = int(arr.shape[0])
        out.append(np.ascontiguousarray(arr).reshape((arr.shape[0], *spec.shape)))
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{k}: {n}" for k, n in counts.items())
        raise ValidationError(f"{what} arrays disagree on the number of samples ({listed}); "
                              "give every array the same first axis")
    n = next(iter(counts.values()), 0)
    if samples is not None and n != samples:
        raise ValidationError(f"{what} holds {n} samples but the data holds {samples}; "
                              "give one reference row per sample, in the same order")
    if samples is None and n == 0:
        raise ValidationError(f"{what} holds 0 samples; give at least one (first axis = sample)")
    return out


def _conversion_hint(have: np.dtype, spec: TensorSpec, kind: str) -> str:
    """``spec``'s dtype and how to give it: quantize floats for a quantized integer tensor
    (a plain ``astype`` would truncate them), else convert."""
    want = spec.dtype
    if have.kind == "f" and want.kind in "iu":
        if spec.scale is not None and spec.zero_point is not None:
            info = np.iinfo(want)
            q = f"x / {spec.scale:.9g}"
            how = (f"np.clip(np.trunc({q} + np.copysign(0.5, x)) + {spec.zero_point}, "
                   f"{info.min}, {info.max}).astype(np.{want.name})")
            flag = "pass --quantize (quantize= in Python), or " if kind == "input" else ""
            return (f"{want} quantized with scale {spec.scale:.9g} and zero point "
                    f"{spec.zero_point}: {flag}quantize it yourself, {how}")
        return (f"{want} with no one scale and zero point in the archive: give {want} values "
                "(a plain astype would truncate the floats)")
    return f"{want}: convert it with .astype(np.{want.name})"


def check_finite(arr: np.ndarray, what: str) -> None:
    """ValidationError naming the first NaN or infinity of a float ``arr`` (``(samples, ...)``)
    and where it is: neither quantizes nor compares to anything meaningful."""
    if arr.dtype.kind not in "fc" or arr.size == 0:
        return
    finite = np.isfinite(arr)
    if finite.all():
        return
    where = tuple(int(i) for i in np.argwhere(~finite)[0])
    count = int(arr.size - np.count_nonzero(finite))
    raise ValidationError(
        f"{what} holds {arr[where]} at index {list(where)} (sample {where[0]}; {count} "
        f"non-finite value{'s' if count != 1 else ''} in all); give finite numbers, e.g. drop "
        "those samples or replace the values with np.nan_to_num"
    )


def quantize_inputs(specs: Sequence[TensorSpec], arrays: Mapping[str, np.ndarray],
                    what: str = "data") -> dict[str, np.ndarray]:
    """Float arrays for quantized integer inputs, quantized with the input's scale and zero
    point as TFLite does (round half away from zero, then clamp); other arrays unchanged."""
    out: dict[str, np.ndarray] = {}
    for key, arr in arrays.items():
        i = _find_key(specs, key)
        arr = np.asarray(arr)
        if i is not None and arr.dtype.kind == "f" and specs[i].dtype.kind in "iu":
            spec = specs[i]
            if spec.scale is None or spec.zero_point is None:
                raise ValidationError(
                    f"--quantize: input {spec.name!r} is {spec.dtype} with no one scale and zero "
                    "point in the archive; give its values as integers")
            check_finite(arr, f"{what} array {key!r}")
            info = np.iinfo(spec.dtype)
            scaled = arr.astype(np.float64) / spec.scale
            rounded = np.trunc(scaled + np.copysign(0.5, scaled)) + spec.zero_point
            arr = np.clip(rounded, info.min, info.max).astype(spec.dtype)
        out[key] = arr
    return out


def bind_inputs(specs: Sequence[TensorSpec], arrays: Mapping[str, np.ndarray],
                what: str = "data") -> list[np.ndarray]:
    """The input arrays in model order, each ``(samples, *shape)``; :class:`ValidationError`
    for a missing, unknown, misshapen or mistyped array or disagreeing sample counts."""
    return _bind(specs, arrays, "input", what, None)


def bind_reference(specs: Sequence[TensorSpec], arrays: Mapping[str, np.ndarray], samples: int,
                   what: str = "reference") -> list[np.ndarray]:
    """The reference arrays in output order, each ``(samples, *shape)``.

    A reference of another dtype is converted when nothing is lost: integers whose values fit
    the output's integer type, floats to the output's float type.
    """
    cast = {}
    for key, arr in arrays.items():
        i = _find_key(specs, key)
        arr = np.asarray(arr)
        if i is not None and arr.dtype != specs[i].dtype:
            want = specs[i].dtype
            if arr.dtype.kind in "iu" and want.kind in "iu":
                converted = arr.astype(want)
                if np.array_equal(converted, arr):
                    arr = converted
            elif arr.dtype.kind == "f" and want.kind == "f":
                arr = arr.astype(want)
        cast[key] = arr
    return _bind(specs, cast, "output", what, samples)


def _dequantize(arr: np.ndarray, scale: float | None, zero_point: int | None) -> np.ndarray:
    values = arr.astype(np.float64)
    if scale is not None and zero_point is not None:
        values = (values - zero_point) * scale
    return values
