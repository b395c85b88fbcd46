"""``project-api ops``: the operators the emitter implements, their dtype schemes and kernels."""

from __future__ import annotations

from typing import Any

from project_api.cli.base import Subcommand


class OpsCommand(Subcommand):
    NAMES = ["ops"]
    HELP = "List the operators 'emit' implements, their dtype schemes and DSP kernels."
    DESCRIPTION = (
        "List every TFLite operator the emitter turns into C, with the dtype schemes it takes "
        "(float32; int8: int8 activations and weights; int16x8: int16 activations, int8 weights, "
        "int64 or int32 bias; for operators that only move data, the element type; for "
        "conversions, from->to) and, per kernel target, the schemes that get DSP-extension "
        "kernels there (the others, and shapes a DSP kernel does not cover, take the portable "
        "kernel). A view costs no code: its output aliases its input; so does a slice or a "
        "split whose output is one contiguous run of its input."
    )
    EPILOG = """\
examples:
  project-api ops
  project-api ops --json | jq '.[] | select(.schemes | index("int16x8")) | .name'
  project-api emit model.tflite --out model.tar --target cortex-m4   # reports what each node got

An operator or type missing here is refused by 'emit' in one line naming the node."""

    def invoke(self) -> int:
        from project_api.emit.ops import REGISTRY
        from project_api.emit.target import TARGET_NAMES

        rows: list[dict[str, Any]] = REGISTRY.table()

        def text() -> str:
            name_w = max(len(_name(r)) for r in rows)
            scheme_w = max(len(_schemes(r["schemes"])) for r in rows)
            widths = [max(len(t), *(len(",".join(r["dsp"][t]) or "-") for r in rows))
                      for t in TARGET_NAMES]
            head = f"{'operator':<{name_w}}  {'schemes':<{scheme_w}}  " + "  ".join(
                f"{t:<{w}}" for t, w in zip(TARGET_NAMES, widths, strict=True))
            lines = [head.rstrip(), "-" * len(head.rstrip())]
            for r in rows:
                cells = "  ".join(f"{','.join(r['dsp'][t]) or '-':<{w}}"
                                  for t, w in zip(TARGET_NAMES, widths, strict=True))
                view = ("  (view: no code)" if r["view"] else
                        "  (a view where contiguous)" if r["offset_view"] else "")
                lines.append(f"{_name(r):<{name_w}}  {_schemes(r['schemes']):<{scheme_w}}  "
                             f"{cells}".rstrip() + view)
            lines.append(f"{len(rows)} operators. Per target: the schemes with DSP-extension "
                         "kernels there (for the shapes they cover); '-': portable C only.")
            return "\n".join(lines)

        self.output(rows, text)
        return 0


def _name(row: dict[str, Any]) -> str:
    return f"{row['name']} (custom)" if row["custom"] else row["name"]


def _schemes(schemes: list[str]) -> str:
    """The schemes as the table shows them: conversions (``from->to``) grouped by source
    (``int8->int16|int32``), or as one product when every source takes every destination."""
    if not all("->" in s for s in schemes):
        return " ".join(schemes)
    pairs = [tuple(s.split("->", 1)) for s in schemes]
    sources = list(dict.fromkeys(a for a, _ in pairs))
    targets = list(dict.fromkeys(b for _, b in pairs))
    if len(pairs) == len(sources) * len(targets) > 1 and len(set(pairs)) == len(pairs):
        return f"{'|'.join(sources)}->{'|'.join(targets)}"
    return " ".join(f"{a}->{'|'.join(b for s, b in pairs if s == a)}" for a in sources)
