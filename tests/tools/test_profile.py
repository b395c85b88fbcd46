"""Profile builds and ``project-api profile`` on the host: the table's arithmetic with a counter
we control (exact ticks per operator, overhead, span, run count), the record on the wire, KWS
profiled through the host template under ASan and UBSan with its outputs bit-exact with TFLite
Micro, ``-o profile=true`` at generate time, a TVM archive timed whole and the note saying why,
Zephyr generation, and one-line errors."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import require_tool

from project_api.api.project import generate_project
from project_api.cli import main
from project_api.emit import emit, emit_sources
from project_api.emit.harness import backend_sources
from project_api.emit.profile import instrument
from project_api.system.paths import crt_dir
from project_api.template import profile_build as P
from project_api.tools.profile import build_report, parse_log, profile_session

#: A cycle counter that moves STEP ticks at every read, and a main that runs the model twice and
#: prints the record in hex.
STEP = 1000
_FAKE_MAIN = """
#include <stdio.h>
#include <stdint.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/crt/platform.h>
#include "tvmgen_default.h"
static uint64_t g_now;
tvm_crt_error_t TVMCrtPlatform_CycleCount(uint64_t* out) { g_now += @STEP@; *out = g_now; return 0; }
uint64_t TVMCrtPlatform_CycleFrequencyHz(void) { return 1000000u; }
static uint8_t g_ws[@WS@] __attribute__((aligned(16)));
static int8_t g_in[@IN@], g_out[@OUT@];
int main(void) {
  uint8_t rec[4096];
  int32_t n, i;
  struct tvmgen_default_inputs in = {g_in};
  struct tvmgen_default_outputs out = {g_out};
  if (TVMCrtWorkspace_Init(g_ws, sizeof(g_ws)) != 0) return 2;
  if (tvmgen_default_run(&in, &out) != 0 || tvmgen_default_run(&in, &out) != 0) return 3;
  if (tvmgen_default_profile_read(rec, 8) != @NEED@) return 4;
  n = tvmgen_default_profile_read(rec, sizeof(rec));
  for (i = 0; i < n; ++i) printf("%02x", rec[i]);
  printf("\\n");
  return 0;
}
"""


def _host_build(gen, where: Path, main_c: str, extra: tuple[str, ...] = ()) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "tvmgen_default.h").write_text(gen.header)
    (where / "lib0.c").write_text(gen.source)
    (where / "main.c").write_text(main_c)
    exe = where / "prog"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", *extra,
                    f"-I{where}", f"-I{crt_dir() / 'include'}", str(where / "lib0.c"),
                    str(where / "main.c"), *map(str, backend_sources()), "-lm", "-o", str(exe)],
                   check=True)
    return exe


def test_table_arithmetic_with_a_counter_we_control(models_dir: Path, tmp_path: Path) -> None:
    """Every operator gets one step (the read after the previous hook's bookkeeping to the next
    hook's first read), the overhead is that same step, the span 2 x hooks-1 steps, two runs."""
    require_tool("cc")
    gen = emit_sources((models_dir / "hello_world_int8.tflite").read_bytes(), profile=True)
    nodes = [k.op.index for k in gen.kernels if not k.alias]
    need = P.record_bytes(len(nodes))
    main_c = (_FAKE_MAIN.replace("@STEP@", str(STEP)).replace("@NEED@", str(need))
              .replace("@WS@", str(gen.workspace_size_bytes + 256)).replace("@IN@", "1")
              .replace("@OUT@", "1"))
    exe = _host_build(gen, tmp_path, main_c, ("-fsanitize=address,undefined",
                                             "-fno-sanitize-recover=all"))
    raw = bytes.fromhex(subprocess.run([str(exe)], capture_output=True, text=True,
                                       check=True).stdout.strip())
    assert len(raw) == need
    version, entries, hz, overhead, total, runs = struct.unpack_from("<IIQQQQ", raw)
    assert (version, entries, hz, runs) == (1, len(nodes), 1_000_000, 2)
    assert overhead == STEP
    assert total == 2 * len(nodes) * STEP  # hooks: one per operator and the end
    rec = P.parse_record(raw)
    assert [n for n, _ in rec.ticks] == nodes
    assert all(t == STEP for _, t in rec.ticks)
    report = build_report("default", [rec], None, total / hz)
    assert all(o.seconds == 0.0 for o in report.ops)  # the overhead is all there was


def test_record_errors_name_the_problem() -> None:
    good = struct.pack("<IIQQQQ", 1, 1, 10, 0, 5, 1) + struct.pack("<IIQ", 3, 0, 5)
    assert P.parse_record(good).ticks == ((3, 5),)
    with pytest.raises(ValueError, match="version 2"):
        P.parse_record(struct.pack("<IIQQQQ", 2, 0, 10, 0, 0, 0))
    with pytest.raises(ValueError, match="of 1 entries has 56 bytes, got 55"):
        P.parse_record(good[:-1])
    with pytest.raises(ValueError, match="at least 40 bytes"):
        P.parse_record(b"\x01")
    text = f"ai: model default ...\nai: profile default 0 {good.hex()}\nai: done 0\n"
    assert parse_log(text)["default"][0].ticks == ((3, 5),)
    with pytest.raises(Exception, match="no profile line"):
        parse_log("ai: done 0\n")


def test_profile_build_is_the_plain_build_plus_the_table(models_dir: Path) -> None:
    data = (models_dir / "kws_ref_model_int8.tflite").read_bytes()
    plain = emit_sources(data, target="cortex-m4")
    prof = emit_sources(data, target="cortex-m4", profile=True)
    assert prof.profile and not plain.profile
    # the same kernels and entry point; only the hook's definition and the table are added
    assert plain.source.split("/* ---- constants ---- */")[1] == \
        prof.source.split("/* ---- constants ---- */")[1]
    assert "#define TVMGEN_OP_HOOK(node) tvmgen_default_prof_hook(node)" in prof.source
    assert P.hook_nodes(prof.source, "default") == [k.op.index for k in plain.kernels
                                                    if not k.alias]
    assert "int32_t tvmgen_default_profile_read(uint8_t* out, uint32_t size);" in prof.header
    assert instrument(prof) is prof


@pytest.fixture(scope="module")
def kws_host(models_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """KWS, a profile build, on the host template under ASan and UBSan."""
    require_tool("cc")
    root = tmp_path_factory.mktemp("profile_host")
    emit(models_dir / "kws_ref_model_int8.tflite", root / "kws.tar", profile=True)
    with generate_project("host", root / "kws.tar", root / "prj",
                          {"sanitize": True, "warning_as_error": True}, build=True) as prj:
        yield prj, root


def _kws_input(seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, (1, 49, 10, 1), dtype=np.int8)


def test_profile_on_the_host_is_bit_exact_and_adds_up(kws_host, models_dir: Path) -> None:
    from project_api.archive import mlf
    from project_api.emit.reference import run_tflm

    prj, root = kws_host
    with mlf.open_mlf(root / "prj" / "model") as lib:
        module, metadata = lib.module(), lib.metadata
    assert module.profile
    x = _kws_input()
    with prj.session() as session:
        report = profile_session(session, module, metadata, [x], repeat=4, number=2)
        raw = P.parse_record(session.call("project_api.profile", "default"))
    want = run_tflm((models_dir / "kws_ref_model_int8.tflite").read_bytes(), [x])
    assert np.array_equal(report.outputs[0], want[0].reshape(report.outputs[0].shape))
    # one warm-up, four profiled runs, then the time evaluator: one run timed alone to size the
    # wait (with its warm-up), then its warm-up and 4 rounds of 2 runs
    assert raw.runs == 1 + 4 + (1 + 1) + (1 + 2 * 4)
    layers = json.loads((root / "prj" / "model" / "metadata.json").read_text())[
        "modules"]["default"]["layers"]
    assert [o.node for o in report.ops] == [la["node"] for la in layers if la["kernel"] != "view"]
    assert [o.macs for o in report.ops] == [la["macs"] for la in layers if la["kernel"] != "view"]
    assert all(o.min_seconds <= o.seconds <= o.max_seconds for o in report.ops)
    assert all(o.seconds > 0 for o in report.ops if o.op in ("CONV_2D", "DEPTHWISE_CONV_2D"))
    # in every run, the operators' intervals are disjoint and inside the span from the first
    # hook to the last
    assert len(report.records) == 4
    for rec in report.records:
        assert sum(t - rec.overhead_ticks for _, t in rec.ticks) <= rec.total_ticks
    assert report.overhead_seconds >= 0 and report.instructions_per_second is None


def test_profile_cli_on_the_host(kws_host, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    _, root = kws_host
    assert main(["profile", str(root / "prj"), "--repeat", "2", "--number", "2", "--json",
                 "--plot", str(tmp_path / "pics")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [o["op"] for o in data["ops"]][:2] == ["CONV_2D", "DEPTHWISE_CONV_2D"]
    assert data["whole_us"] > 0 and data["note"] is None
    png = tmp_path / "pics" / "profile.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and 10_000 < png.stat().st_size < 150_000
    assert main(["profile", str(root / "prj"), "--repeat", "1", "--number", "1"]) == 0
    out = capsys.readouterr().out
    assert "CONV_2D" in out and "whole model:" in out and "overhead subtracted:" in out


def test_generate_profile_option_instruments_an_archive(models_dir: Path, tmp_path: Path) -> None:
    """-o profile=true makes a plain archive of ours a profile build: the same outputs."""
    require_tool("cc")
    from project_api.archive import mlf

    emit(models_dir / "micro_speech_int8.tflite", tmp_path / "ms.tar")
    x = np.random.default_rng(1).integers(-128, 128, (1, 1960), dtype=np.int8)
    outs = {}
    for profile in (False, True):
        where = tmp_path / f"prj{int(profile)}"
        with generate_project("host", tmp_path / "ms.tar", where, {"profile": profile},
                              build=True) as prj:
            with mlf.open_mlf(where / "model") as lib:
                module, metadata = lib.module(), lib.metadata
            assert module.profile is profile
            with prj.session() as session:
                report = profile_session(session, module, metadata, [x], repeat=1, number=1)
            outs[profile] = report.outputs[0]
            assert bool(report.ops) is profile
            if not profile:
                assert "is not a profile build" in (report.note or "")
    assert np.array_equal(outs[False], outs[True])


def test_tvm_archive_is_timed_whole_and_profile_says_why(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]):
    require_tool("cc")
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from tvm_corpus import build_archive

    arc = build_archive("tvm-0.12-int8", tmp_path)
    with generate_project("host", arc.path, tmp_path / "prj", {}, build=True):
        pass
    assert main(["profile", str(tmp_path / "prj"), "--repeat", "1", "--number", "1",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ops"] == [] and data["whole_us"] > 0
    assert "not compiled by project-api emit" in data["note"]
    # and -o profile=true refuses it in one line, leaving no project behind
    from project_api.errors import ProjectAPIError

    with pytest.raises(ProjectAPIError, match="not project-api emit's"):
        generate_project("host", arc.path, tmp_path / "p2", {"profile": True})
    assert not (tmp_path / "p2").exists()


def test_zephyr_generation_of_a_profile_build(models_dir: Path, tmp_path: Path) -> None:
    """Zephyr itself is not installed here: the generated application links the profile glue
    and its port defines the counter."""
    emit(models_dir / "hello_world_int8.tflite", tmp_path / "hw.tar", profile=True)
    with generate_project("zephyr", tmp_path / "hw.tar", tmp_path / "prj",
                          {"board": "qemu_cortex_m3"}):
        pass
    glue = (tmp_path / "prj" / "src" / "model_glue.c").read_text()
    assert "int32_t TVMCrtAotModel_Profile(const char* module_name, uint8_t* out, size_t size)" \
        in glue
    assert "return tvmgen_default_profile_read(out, room);" in glue
    platform = (tmp_path / "prj" / "src" / "platform.c").read_text()
    assert "tvm_crt_error_t TVMCrtPlatform_CycleCount(uint64_t* out_cycles)" in platform
    assert "uint64_t TVMCrtPlatform_CycleFrequencyHz(void)" in platform


def test_profile_cli_errors(kws_host, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, root = kws_host
    cases = [
        (["profile"], 2, "give a project DIR"),
        (["profile", str(root / "prj"), "--template", "host"], 2, "not both"),
        (["profile", str(root / "prj"), "--repeat", "0"], 2, "--repeat 0 is out of range"),
        (["profile", str(root / "prj"), "--log", str(tmp_path / "none.txt")], 1,
         "is not a file"),
        (["profile", "--log", "x.txt"], 2, "needs the project DIR"),
    ]
    for argv, status, text in cases:
        assert main(argv) == status, argv
        err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
        assert len(err) == 1 and text in err[0], (argv, err)
