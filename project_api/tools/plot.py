"""Pictures of ``project-api analyze`` and ``project-api profile``, as small PNG files.

Each function takes plain data (an :class:`project_api.tools.analyze.Analysis`, a
:class:`project_api.tools.profile.ProfileReport`) and writes one file with matplotlib's Agg backend;
matplotlib is the ``plot`` extra, imported through :func:`project_api.system.extras.require` so a missing
one is named in one line. :func:`write_pictures` refuses to replace an existing file unless
``force``, and removes what it wrote when a later picture fails.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from project_api.errors import ProjectError
from project_api.system.extras import require

if TYPE_CHECKING:
    from project_api.tools.analyze import Analysis
    from project_api.tools.profile import ProfileReport

__all__ = ["ANALYZE_PICTURES", "PROFILE_PICTURES", "write_pictures"]

_LOG = logging.getLogger(__name__)

#: Picture size (inches) and resolution: a few tens of kilobytes per PNG.
_SIZE = (8.0, 4.2)
_DPI = 80
_KERNEL_COLORS = {"dsp": "#2f7ebc", "generic": "#e6862e", "view": "#9a9a9a", "tvm": "#6a51a3"}
_CATEGORY_COLORS = {"runtime": "#4c72b0", "rpc server": "#8172b2", "model code": "#dd8452",
                    "model weights": "#c44e52", "activations": "#55a868",
                    "application": "#937860", "model pool": "#55a868", "state": "#da8bc3"}


def _pyplot(purpose: str) -> Any:
    matplotlib = require("matplotlib", purpose)
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _short(op: str, node: int) -> str:
    words = {"CONV_2D": "conv", "DEPTHWISE_CONV_2D": "dwconv", "FULLY_CONNECTED": "fc",
             "AVERAGE_POOL_2D": "avgpool", "MAX_POOL_2D": "maxpool", "SOFTMAX": "softmax",
             "RESHAPE": "reshape", "ADD": "add", "MUL": "mul", "QUANTIZE": "quant",
             "DEQUANTIZE": "dequant", "CONCATENATION": "concat", "PAD": "pad"}
    return f"{node} {words.get(op, op.lower())}"


def _save(fig: Any, plt: Any, path: Path, rect: tuple[float, ...] = (0, 0, 1, 1)) -> None:
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)


def pool_picture(analysis: Analysis, path: Path) -> None:
    """The activation pool: each buffer a rectangle over the layers it lives through (x) and its
    bytes (y), the planner's lower bound and the pool size marked."""
    plt = _pyplot("analyze --plot (the pool picture)")
    from matplotlib.patches import Rectangle

    plan = analysis.pool_plan
    fig, ax = plt.subplots(figsize=_SIZE)
    n = max((b.last for b in plan.buffers), default=0) + 1
    for b in plan.buffers:
        color = "#c44e52" if b.scratch else "#4c72b0"
        ax.add_patch(Rectangle((b.first, b.offset), b.last - b.first + 1, b.size,
                               facecolor=color, edgecolor="white", alpha=0.85, linewidth=0.8))
    top = max(plan.size, plan.lower_bound, 1)
    ax.axhline(plan.lower_bound, color="black", linestyle="--", linewidth=1.2,
               label=f"lower bound {plan.lower_bound:,} B")
    ax.axhline(plan.size, color="#55a868", linestyle="-", linewidth=1.2,
               label=f"pool {plan.size:,} B")
    ax.set_xlim(0, max(n, 1))
    ax.set_ylim(0, top * 1.12)
    ax.set_xlabel("layer (execution order)")
    ax.set_ylabel("pool offset (bytes)")
    ax.set_title(f"{analysis.title}: activation pool plan (blue: tensors, red: scratch)")
    if analysis.layers:
        ax.set_xticks([i + 0.5 for i in range(len(analysis.layers))])
        ax.set_xticklabels([_short(la.op, la.node) for la in analysis.layers], rotation=60,
                           ha="right", fontsize=7)
    ax.legend(loc="upper right", fontsize=8)
    _save(fig, plt, path)


def layers_picture(analysis: Analysis, path: Path) -> None:
    """MACs and weight bytes per layer, side by side, coloured by kernel kind."""
    plt = _pyplot("analyze --plot (the per-layer picture)")
    layers = analysis.layers or []
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=_SIZE)
    labels = [_short(la.op, la.node) for la in layers]
    colors = [_KERNEL_COLORS.get(la.kernel, "#777777") for la in layers]
    ys = range(len(layers))
    ax1.barh(ys, [la.macs for la in layers], color=colors)
    ax2.barh(ys, [la.weight_bytes for la in layers], color=colors)
    for ax, what in ((ax1, "MACs"), (ax2, f"weight bytes ({analysis.target})")):
        ax.set_yticks(list(ys))
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(what)
        ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 3))
    ax2.set_yticklabels([])
    kinds = sorted({la.kernel for la in layers})
    handles = [plt.Rectangle((0, 0), 1, 1, color=_KERNEL_COLORS.get(k, "#777777")) for k in kinds]
    ax1.legend(handles, kinds, fontsize=7, loc="lower right")
    fig.suptitle(f"{analysis.title}: MACs and weights per layer", fontsize=10)
    _save(fig, plt, path)


def memory_picture(analysis: Analysis, path: Path) -> None:
    """Flash and RAM split by part (runtime, RPC server, model code, weights, activations,
    application) against the board's regions, one bar per region on its own scale; without a
    board, the model's own parts."""
    plt = _pyplot("analyze --plot (the memory picture)")
    regions = analysis.memory_regions()
    fig, axes = plt.subplots(len(regions), 1, figsize=_SIZE, squeeze=False)
    handles: dict[str, Any] = {}
    for ax, (region, r) in zip(axes[:, 0], regions.items(), strict=True):
        left = 0
        for cat, size in r["split"].items():
            if size <= 0:
                continue
            bar = ax.barh(0, size, left=left, color=_CATEGORY_COLORS.get(cat, "#777777"),
                          edgecolor="white")
            handles.setdefault(cat, bar)
            left += size
        length = r.get("length")
        top = max(left, length or 0, 1)
        if length:
            ax.axvline(length, color="black", linewidth=2)
            ax.text(length, 0.5, f"{length:,} B ", fontsize=7, ha="right", va="bottom")
        name = "RAM" if region == "ram" else region
        used = f"{left:,} B" + (f" of {length:,} B ({100 * left / length:.1f} %)" if length
                                else "")
        ax.set_title(f"{name}: {used}", fontsize=8, loc="left")
        ax.set_xlim(0, top * 1.05)
        ax.set_yticks([])
        ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 3))
    axes[-1, 0].set_xlabel("bytes")
    fig.legend(list(handles.values()), list(handles.keys()), fontsize=7, loc="lower center",
               ncol=len(handles), frameon=False)
    where = f" on {analysis.fit.board}" if analysis.fit is not None else " (no board: model only)"
    fig.suptitle(f"{analysis.title}: memory{where}", fontsize=10)
    _save(fig, plt, path, rect=(0, 0.06, 1, 1))


def profile_picture(report: ProfileReport, path: Path) -> None:
    """Device time per layer beside MACs per layer, coloured by kernel kind."""
    plt = _pyplot("profile --plot")
    ops = report.ops
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=_SIZE)
    labels = [_short(o.op, o.node) for o in ops]
    colors = [_KERNEL_COLORS.get(o.kernel, "#777777") for o in ops]
    ys = range(len(ops))
    ax1.barh(ys, [o.seconds * 1e6 for o in ops], color=colors)
    ax2.barh(ys, [o.macs for o in ops], color=colors)
    ax1.set_xlabel("device time (us)" + (" = instructions / 1000" if report.instructions_per_second
                                         else ""))
    ax2.set_xlabel("MACs")
    for ax in (ax1, ax2):
        ax.set_yticks(list(ys))
        ax.invert_yaxis()
    ax1.set_yticklabels(labels, fontsize=7)
    ax2.set_yticklabels([])
    ax2.ticklabel_format(axis="x", style="sci", scilimits=(0, 3))
    fig.suptitle(f"{report.module}: time and MACs per layer ({report.repeats} runs, whole "
                 f"{report.whole_seconds * 1e6:,.0f} us)", fontsize=10)
    _save(fig, plt, path)


#: The pictures ``analyze --plot`` writes: file name -> (function, when it applies).
ANALYZE_PICTURES: dict[str, tuple[Callable[[Any, Path], None], Callable[[Any], bool]]] = {
    "pool.png": (pool_picture, lambda a: bool(a.pool_plan.buffers)),
    "layers.png": (layers_picture, lambda a: bool(a.layers)),
    "memory.png": (memory_picture, lambda a: bool(a.memory_regions())),
}
PROFILE_PICTURES: dict[str, tuple[Callable[[Any, Path], None], Callable[[Any], bool]]] = {
    "profile.png": (profile_picture, lambda r: bool(r.ops)),
}


def write_pictures(data: Any, directory: str | Path,
                   pictures: dict[str, tuple[Callable[[Any, Path], None], Callable[[Any], bool]]],
                   force: bool = False) -> list[Path]:
    """Write every picture of ``pictures`` that applies to ``data`` into ``directory``
    (created if missing); return their paths. An existing file is refused without ``force``;
    on a failure the pictures written so far are removed."""
    _pyplot("--plot")  # a missing extra is said before anything is written
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise ProjectError(f"--plot {out} is a file; name a folder for the pictures")
    todo = [(name, fn) for name, (fn, applies) in pictures.items() if applies(data)]
    taken = [out / name for name, _ in todo if (out / name).exists()]
    if taken and not force:
        raise ProjectError(f"{taken[0]} already exists; pass --force to replace the pictures "
                           "in " + str(out))
    created_dir = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    try:
        for name, fn in todo:
            fn(data, out / name)
            written.append(out / name)
    except BaseException:
        for p in written:
            p.unlink(missing_ok=True)
        if created_dir:
            try:
                out.rmdir()
            except OSError:
                pass
        raise
    _LOG.info("wrote %s", ", ".join(str(p) for p in written))
    return written

