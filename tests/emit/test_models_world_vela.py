"""Issue 37 item 5: a model compiled by Vela for the Ethos-U NPU is refused in one line that
names Vela and the Ethos-U and says to give the .tflite from before Vela: from ``emit`` and from
``run --check``, also where CPU nodes Vela left outside its command stream come first and are
ones the emitter lacks."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from project_api.emit import emit_sources
from project_api.errors import UnsupportedOperatorError
from project_api.tflite.builder import ModelBuilder

LINE = (r"custom operator 'ethos-u' \(node \d\) computing '[^']+': the model's layers were "
        r"compiled by Vela into a command stream for an Arm Ethos-U NPU, which no CPU runs; give "
        r"the \.tflite from before Vela \(the one Vela was given\)")


def vela_model(cpu_first: bool = False) -> bytes:
    """Laid out as Vela writes it: the command stream, the flash and scratch areas as the
    ``ethos-u`` operator's inputs; optionally an unsupported CPU node before it."""
    mb = ModelBuilder(seed=0)
    x = mb.input((1, 32, 32, 3), "int8", quant=(1 / 128, 0), name="serving_default_input:0")
    if cpu_first:
        (x,) = mb.custom("SomeCpuFallback", [x], [((1, 32, 32, 3), "int8", (1 / 128, 0))])
    stream = mb.constant(np.arange(256, dtype=np.uint8), "uint8", name="_split_1_command_stream")
    flash = mb.constant(np.zeros(1024, np.uint8), "uint8", name="_split_1_flash")
    (y,) = mb.custom("ethos-u", [stream, flash, x], [((1, 10), "int8", (1 / 256, -128))])
    mb.output(y)
    return mb.build()


@pytest.mark.parametrize("cpu_first", [False, True], ids=["alone", "after-cpu-nodes"])
def test_emit_refuses_a_vela_model_in_one_line(cpu_first):
    with pytest.raises(UnsupportedOperatorError, match="^" + LINE + "$") as info:
        emit_sources(vela_model(cpu_first))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("command", ["emit", "run"])
def test_the_cli_says_so(tmp_path, command):
    model = tmp_path / "person_vela.tflite"
    model.write_bytes(vela_model())
    args = (["emit", str(model), "-o", str(tmp_path / "m.tar")] if command == "emit" else
            ["run", "--template", "host", "--model", str(model), "--check", "--repeat", "1"])
    out = subprocess.run([sys.executable, "-m", "project_api", *args], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert out.returncode != 0
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and out.stderr.rstrip().endswith(lines[0]), out.stderr
    assert "Vela" in lines[0] and "Ethos-U" in lines[0] and "before Vela" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["person_vela.tflite"]
