"""labgrid places on this machine (#11): a coordinator and an exporter on 127.0.0.1 publish three
QEMU STM32 boards (board 0 through ser2net's RFC 2217 accepter, boards 1 and 2 raw TCP) as the
NetworkSerialPort resources of places farm-0..2. ``run -o labgrid_place=``, ``validate --places``
over all three, a board killed mid-run, an acquisition conflict and the wait for it, the release
after the client is killed, a place with other firmware refused, ``devices`` with the
coordinator; every process started here is stopped again."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from farm_support import Farm, labgrid_client, require_farm_tools
from helpers.signals import default_sigint
from stm32_support import (  # noqa: F401  (the fixture is autouse)
    build_project,
    stm32_tools_and_no_qemu_left,
)

from project_api.api.project import GeneratedProject, generate_project
from project_api.emit import emit
from project_api.errors import ProjectError, ServerError
from project_api.tools.farm import validate_on_places
from project_api.tools.references import tflm_outputs
from project_api.tools.validate import validate

HOLDER = {"LG_USERNAME": "alice", "LG_HOSTNAME": "bench-pc"}


def keeper_pids(coordinator: str) -> set[int]:
    """Place keepers (project_api.template.labgrid_keeper) talking to ``coordinator``."""
    out = subprocess.run(["pgrep", "-f", f"project_api.template.labgrid_keeper --coordinator="
                          f"{coordinator}"], capture_output=True, text=True)
    return {int(p) for p in out.stdout.split()}


@pytest.fixture(scope="module")
def lab(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    require_farm_tools()
    root = tmp_path_factory.mktemp("labgrid")
    tflite = models_dir / "hello_world_int8.tflite"
    mlf = emit(tflite, root / "hello.tar", name="default")
    build_project(mlf.path, root / "prj").close()
    farm = Farm(root / "farm", root / "prj" / "build" / "firmware.elf", boards=3, debugger=True)
    try:
        yield {"prj": root / "prj", "tflite": tflite, "mlf": mlf, "farm": farm, "root": root}
    finally:
        coordinator = farm.coordinator
        farm.close()
        farm.assert_stopped()
        assert coordinator is not None and not keeper_pids(coordinator), "a keeper was left"


def _samples(mlf, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    t = mlf.inputs[0]
    rng = np.random.default_rng(seed)
    return {t.name: rng.integers(-128, 127, (n, *t.shape), dtype=np.int8, endpoint=True)}


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 240) -> \
        subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "project_api", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def _wait_holder(farm: Farm, place: str, want: str | None, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while (holder := farm.holder(place)) != want:
        assert time.monotonic() < deadline, f"{place} is held by {holder}, want {want}"
        time.sleep(0.2)


def test_cli_run_through_a_labgrid_place(lab: dict, tmp_path: Path) -> None:
    """``project-api run prj -o labgrid_place=farm-0`` with LG_COORDINATOR: the RFC 2217 place,
    bit-exact with TFLite Micro; the place is free again afterwards."""
    farm, mlf = lab["farm"], lab["mlf"]
    x = _samples(mlf, 1, seed=7)[mlf.inputs[0].name][0]
    np.save(tmp_path / "x.npy", x)
    out = _cli("run", str(lab["prj"]), "-o", "labgrid_place=farm-0", "--input",
               f"0={tmp_path / 'x.npy'}", "--output", str(tmp_path / "y.npz"),
               env={"LG_COORDINATOR": farm.coordinator})
    assert out.returncode == 0, out.stderr
    (want,) = tflm_outputs(lab["tflite"].read_bytes(), [x[None]])
    got = np.load(tmp_path / "y.npz")
    assert np.array_equal(got[got.files[0]].reshape(want[0].shape), want[0])
    assert farm.holder("farm-0") is None


def test_validate_through_a_raw_place_is_bit_exact(lab: dict) -> None:
    farm = lab["farm"]
    with GeneratedProject.from_directory(lab["prj"], {
            "labgrid_place": "farm-2", "labgrid_coordinator": farm.coordinator}) as project:
        report = validate(project, _samples(lab["mlf"], 30), tflite=lab["tflite"], litert=False,
                          number=1, repeat=1)
        assert farm.holder("farm-2") is None  # the session is closed: released
    (tflm,) = report.comparison("tflm").outputs
    assert tflm.exact == 1.0 and tflm.samples == 30


def test_validate_places_over_three_boards(lab: dict, tmp_path: Path) -> None:
    """``project-api validate prj --places 'farm-*'``: every sample once, bit-exact, every place
    did some, samples/s per place and in total."""
    farm, mlf = lab["farm"], lab["mlf"]
    np.savez(tmp_path / "samples.npz", **_samples(mlf, 240, seed=3))
    out = _cli("validate", str(lab["prj"]), "--data", str(tmp_path / "samples.npz"), "--model",
               str(lab["tflite"]), "--no-litert", "--places", "farm-*", "--coordinator",
               farm.coordinator, "--fail-under", "exact=1.0", "--json", "-q")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    places = {p["name"]: p for p in data["places"]}
    assert set(places) == {"farm-0", "farm-1", "farm-2"}
    assert all(p["status"] == "ok" and p["samples"] > 0 for p in places.values()), places
    assert sum(p["samples"] for p in places.values()) == 240
    assert data["samples"] == 240 and data["ok"] and data["samples_per_second"] > 0
    assert all(p["samples_per_second"] > 0 for p in places.values())
    text = _cli("validate", str(lab["prj"]), "--data", str(tmp_path / "samples.npz"), "--model",
                str(lab["tflite"]), "--no-litert", "--places", "farm-[12]", "--coordinator",
                farm.coordinator, "--limit", "40", "-q")
    assert text.returncode == 0, text.stderr
    assert "40 samples over 2 places" in text.stdout and "farm-1" in text.stdout
    assert all(farm.holder(p) is None for p in farm.places)


def test_acquisition_conflict_names_the_holder_and_wait_gets_it(lab: dict) -> None:
    farm = lab["farm"]
    labgrid_client(farm.coordinator, "-p", "farm-1", "acquire", env=HOLDER)
    try:
        with GeneratedProject.from_directory(lab["prj"], {
                "labgrid_place": "farm-1", "labgrid_coordinator": farm.coordinator}) as project:
            with pytest.raises(ServerError) as info:
                project.session().open()
        message = str(info.value)
        assert "held by bench-pc/alice" in message and "labgrid_wait" in message
        # --places refuses a pattern whose every place is held, naming the holder.
        with pytest.raises(ProjectError, match="held: farm-1 held by bench-pc/alice"):
            validate_on_places(lab["prj"], _samples(lab["mlf"], 12), "farm-1",
                               coordinator=farm.coordinator)
        # labgrid_wait: alice releases after 2 s, and the session gets the place.
        releaser = threading.Timer(2.0, labgrid_client, (farm.coordinator, "-p", "farm-1",
                                                         "release"), {"env": HOLDER})
        releaser.start()
        began = time.monotonic()
        with GeneratedProject.from_directory(lab["prj"], {
                "labgrid_place": "farm-1", "labgrid_coordinator": farm.coordinator,
                "labgrid_wait": 60}) as project, project.session() as session:
            assert time.monotonic() - began >= 1.5
            assert farm.holder("farm-1") not in (None, "bench-pc/alice")
            model = session.model()
            model.set_input(0, np.zeros((1, 1), np.int8))
            model.run()
        releaser.join()
        assert farm.holder("farm-1") is None
    finally:
        if farm.holder("farm-1") == "bench-pc/alice":
            labgrid_client(farm.coordinator, "-p", "farm-1", "release", env=HOLDER)


def test_unknown_place_lists_the_places(lab: dict) -> None:
    farm = lab["farm"]
    with GeneratedProject.from_directory(lab["prj"], {
            "labgrid_place": "nope", "labgrid_coordinator": farm.coordinator}) as project:
        with pytest.raises(ServerError, match=r"labgrid place nope on 127.0.0.1:\d+: no such "
                                              r"place \(places: dbg-0, farm-0, farm-1, farm-2\)"):
            project.session().open()
    assert not keeper_pids(farm.coordinator)


CLIENT = """
import sys, time
from project_api.api.project import GeneratedProject
project = GeneratedProject.from_directory(sys.argv[1], {"labgrid_place": "farm-2",
                                                        "labgrid_coordinator": sys.argv[2]})
session = project.session().open()
print("open", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("how", ["SIGKILL to the client", "Ctrl-C (SIGINT to its group)"])
def test_place_released_after_the_client_is_killed(lab: dict, how: str) -> None:
    """The client dies without closing anything (SIGKILL), or the terminal's Ctrl-C reaches
    the client, its server and the place keeper at once: the place is released either way."""
    farm = lab["farm"]
    proc = subprocess.Popen([sys.executable, "-c", CLIENT, str(lab["prj"]), farm.coordinator],
                            stdout=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=default_sigint)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "open"
        holder = farm.holder("farm-2")
        assert holder is not None
        if how.startswith("SIGKILL"):
            proc.send_signal(signal.SIGKILL)
        else:
            os.killpg(proc.pid, signal.SIGINT)
        proc.wait(30)
        _wait_holder(farm, "farm-2", None)
        deadline = time.monotonic() + 10
        while keeper_pids(farm.coordinator) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not keeper_pids(farm.coordinator)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_place_with_other_firmware_is_refused(lab: dict) -> None:
    """A project generated with other options has another build hash: every place runs the
    first project's firmware, so each is refused and no sample runs."""
    other = generate_project("stm32", lab["mlf"].path, lab["root"] / "other",
                             {"board": "qemu_netduinoplus2", "opt_level": "2"})
    other.close()
    assert (lab["root"] / "other" / "build_hash.txt").read_text() != \
        (lab["prj"] / "build_hash.txt").read_text()
    with pytest.raises(ProjectError) as info:
        validate_on_places(lab["root"] / "other", _samples(lab["mlf"], 6), "farm-[12]",
                           coordinator=lab["farm"].coordinator)
    message = str(info.value)
    assert "6 of 6 samples were not run" in message
    assert "farm-1: refused (its firmware reports build hash" in message


def test_devices_lists_the_places(lab: dict) -> None:
    farm = lab["farm"]
    labgrid_client(farm.coordinator, "-p", "farm-1", "acquire", env=HOLDER)
    try:
        out = _cli("devices", "--json", "--no-probes", env={"LG_COORDINATOR": farm.coordinator})
        assert out.returncode == 0, out.stderr
        places = {p["name"]: p for p in json.loads(out.stdout)["labgrid"]["places"]}
        assert places["farm-1"]["state"] == "acquired"
        assert places["farm-1"]["acquired"] == "bench-pc/alice"
        assert places["farm-0"]["state"] == "free"
        assert places["farm-0"]["serial_ports"][0].startswith(
            f"rfc2217://127.0.0.1:{farm.rfc2217_port}")
        assert places["farm-2"]["serial_ports"] == [farm.url(2)]
        text = _cli("devices", "--no-probes", "--coordinator", farm.coordinator).stdout
        assert "farm-1  acquired by bench-pc/alice" in text and "farm-2  free" in text
    finally:
        labgrid_client(farm.coordinator, "-p", "farm-1", "release", env=HOLDER)


# --- owners of places (#21): a dead keeper's place is released by the next project-api ---------


def _place(farm: Farm, name: str):
    from project_api.tools.places import list_places

    return {p.name: p for p in list_places(farm.coordinator)}[name]


def _tag_owner(farm: Farm, place: str, value: str) -> None:
    """Acquire ``place`` with labgrid-client as this host and user, and give it an owner
    record, as a keeper of this machine would have."""
    labgrid_client(farm.coordinator, "-p", place, "acquire")
    labgrid_client(farm.coordinator, "-p", place, "set-tags", f"project_api_owner={value}")


def _untag(farm: Farm, place: str) -> None:
    labgrid_client(farm.coordinator, "-p", place, "set-tags", "project_api_owner=")
    if farm.holder(place) is not None:
        labgrid_client(farm.coordinator, "-p", place, "release", "--kick")


def _start_ticks(pid: int) -> int:
    """Process ``pid``'s start in clock ticks after boot, read here from /proc independently."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[19])


def test_sigkilled_keeper_place_is_released_by_the_next_run(lab: dict, tmp_path: Path) -> None:
    """A keeper SIGKILLed while it holds farm-2 leaves it acquired (labgrid has no lease), with
    its owner record; ``devices`` shows the owner running, then gone; the next ``project-api
    run`` on the place releases it with one line saying so, runs bit-exact, and frees it."""
    from project_api.template.labgrid_place import acquire_place

    farm, mlf = lab["farm"], lab["mlf"]
    keeper = acquire_place("farm-2", farm.coordinator)
    proc = keeper.proc
    assert proc is not None
    try:
        owner = _place(farm, "farm-2").owner
        assert owner is not None
        assert (owner.pid, owner.start) == (proc.pid, _start_ticks(proc.pid))
        listed = _cli("devices", "--json", "--no-probes", "--coordinator", farm.coordinator)
        place = {p["name"]: p for p in json.loads(listed.stdout)["labgrid"]["places"]}["farm-2"]
        assert place["owner"]["pid"] == proc.pid and place["owner"]["alive"] is True
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        keeper.proc = None
        proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            pipe.close()  # type: ignore[union-attr]
    holder = farm.holder("farm-2")
    assert holder is not None  # labgrid keeps it acquired for the dead keeper
    listed = _cli("devices", "--json", "--no-probes", "--coordinator", farm.coordinator)
    place = {p["name"]: p for p in json.loads(listed.stdout)["labgrid"]["places"]}["farm-2"]
    assert place["state"] == "acquired" and place["owner"]["alive"] is False
    text = _cli("devices", "--no-probes", "--coordinator", farm.coordinator).stdout
    assert f"farm-2  acquired by {holder} (project-api pid {proc.pid} on " in text
    assert "gone: the next acquirer releases it)" in text

    x = _samples(mlf, 1, seed=5)[mlf.inputs[0].name][0]
    np.save(tmp_path / "x.npy", x)
    out = _cli("run", str(lab["prj"]), "-v", "-o", "labgrid_place=farm-2", "--input",
               f"0={tmp_path / 'x.npy'}", "--output", str(tmp_path / "y.npz"),
               env={"LG_COORDINATOR": farm.coordinator})
    assert out.returncode == 0, out.stderr
    released = [line for line in out.stderr.splitlines() if "released place farm-2:" in line]
    assert len(released) == 1, out.stderr
    assert released[0].endswith(f"labgrid: released place farm-2: its holder {holder} "
                                f"(project-api pid {proc.pid} on {owner.host}) is gone")
    (want,) = tflm_outputs(lab["tflite"].read_bytes(), [x[None]])
    got = np.load(tmp_path / "y.npz")
    assert np.array_equal(got[got.files[0]].reshape(want[0].shape), want[0])
    assert farm.holder("farm-2") is None
    assert "project_api_owner" not in _place(farm, "farm-2").tags


def test_live_owner_is_refused_and_a_recycled_pid_counts_as_dead(
        lab: dict, caplog: pytest.LogCaptureFixture) -> None:
    """farm-1 held with an owner record naming this test's process: refused, the owner named
    with the command that releases it; ``devices`` says it runs. The same pid with another
    start time (a recycled pid) is a dead owner: ``validate --places`` counts the place as
    free, its keeper releases it (one line) and every sample runs there."""
    from project_api.template.labgrid_place import acquire_place

    farm = lab["farm"]
    me = f"{os.getpid()}_{_start_ticks(os.getpid())}"
    from project_api.template.labgrid_owner import pid_space

    _tag_owner(farm, "farm-1", f"{me}_{pid_space()}_bench_pc")
    try:
        holder = farm.holder("farm-1")
        with pytest.raises(ServerError) as info:
            acquire_place("farm-1", farm.coordinator)
        message = str(info.value)
        assert f"held by {holder} (project-api pid {os.getpid()} on bench_pc, running)" in message
        assert f"'labgrid-client -x {farm.coordinator} -p farm-1 release --kick'" in message
        assert farm.holder("farm-1") == holder
        with pytest.raises(ProjectError, match=rf"farm-1 held by {holder} \(project-api pid "
                                               rf"{os.getpid()} on bench_pc, running\)"):
            validate_on_places(lab["prj"], _samples(lab["mlf"], 4), "farm-1",
                               coordinator=farm.coordinator)
        out = _cli("devices", "--json", "--no-probes", "--coordinator", farm.coordinator)
        owner = {p["name"]: p for p in json.loads(out.stdout)["labgrid"]["places"]}["farm-1"][
            "owner"]
        assert owner == {"pid": os.getpid(), "start": _start_ticks(os.getpid()),
                         "host": "bench_pc", "local": True, "alive": True}

        # The pid recycled: the record's start time is another process's.
        recycled = f"{os.getpid()}_{_start_ticks(os.getpid()) + 1}_{pid_space()}_bench_pc"
        labgrid_client(farm.coordinator, "-p", "farm-1", "set-tags",
                       f"project_api_owner={recycled}")
        assert _place(farm, "farm-1").stale
        with caplog.at_level(logging.WARNING, "project_api.server_log"):
            report = validate_on_places(lab["prj"], _samples(lab["mlf"], 12, seed=2), "farm-1",
                                        coordinator=farm.coordinator, tflite=lab["tflite"],
                                        litert=False)
        released = [r.getMessage() for r in caplog.records
                    if "labgrid: released place farm-1:" in r.getMessage()]
        assert len(released) == 1, caplog.text
        assert released[0].endswith(f"(project-api pid {os.getpid()} on bench_pc) is gone")
        (run,) = report.places
        assert run.status == "ok" and run.samples == 12
        (tflm,) = report.validation.comparison("tflm").outputs
        assert tflm.exact == 1.0
        assert farm.holder("farm-1") is None
    finally:
        _untag(farm, "farm-1")


def test_foreign_acquisitions_are_never_released(lab: dict) -> None:
    """A place acquired with labgrid-client (no owner record), and one whose record names a
    process in another pid space (another host), even a pid that is gone here: both refused,
    both still held afterwards."""
    from project_api.template.labgrid_place import acquire_place

    farm = lab["farm"]
    labgrid_client(farm.coordinator, "-p", "farm-1", "acquire")
    try:
        holder = farm.holder("farm-1")
        with pytest.raises(ServerError) as info:
            acquire_place("farm-1", farm.coordinator)
        assert str(info.value).endswith(
            f"held by {holder}; release it with 'labgrid-client -x {farm.coordinator} -p "
            "farm-1 release --kick'; wait for it with -o labgrid_wait=SECONDS")
        assert farm.holder("farm-1") == holder
        dead = subprocess.Popen(["true"])
        dead.wait()
        labgrid_client(farm.coordinator, "-p", "farm-1", "set-tags",
                       f"project_api_owner={dead.pid}_1_0123456789abcdef_lab_pc")
        with pytest.raises(ServerError, match=r"project-api pid \d+ on lab_pc, cannot tell "
                                              "whether it runs: another host"):
            acquire_place("farm-1", farm.coordinator)
        assert farm.holder("farm-1") == holder
        place = _place(farm, "farm-1")
        assert not place.stale and place.owner is not None and place.owner.alive() is None
    finally:
        _untag(farm, "farm-1")


def test_labgrid_wait_takes_a_place_whose_owner_dies(lab: dict, capfd: pytest.CaptureFixture) \
        -> None:
    """A keeper waiting (labgrid_wait) for farm-1, held for a live process: once that process
    is killed, the place counts as free; the keeper releases and acquires it."""
    from project_api.template.labgrid_owner import pid_space
    from project_api.template.labgrid_place import acquire_place

    farm = lab["farm"]
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        _tag_owner(farm, "farm-1", f"{sleeper.pid}_{_start_ticks(sleeper.pid)}_{pid_space()}_x")
        killer = threading.Timer(2.0, sleeper.kill)
        killer.start()
        began = time.monotonic()
        capfd.readouterr()
        keeper = acquire_place("farm-1", farm.coordinator, wait_sec=60)
        try:
            assert time.monotonic() - began >= 1.5
            killer.join()
            assert f"(project-api pid {sleeper.pid} on x) is gone" in capfd.readouterr().err
            owner = _place(farm, "farm-1").owner
            assert owner is not None and owner.pid == keeper.proc.pid  # type: ignore[union-attr]
        finally:
            keeper.close()
        assert farm.holder("farm-1") is None
    finally:
        sleeper.kill()
        sleeper.wait()
        _untag(farm, "farm-1")


def test_board_killed_mid_run_its_samples_finish_on_the_others(
        lab: dict, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Its own farm (a board is lost): board 1's QEMU is killed once a third of the samples are
    done; the report names farm-1 as failed and every sample is there once, bit-exact."""
    farm = Farm(tmp_path_factory.mktemp("killed"), lab["prj"] / "build" / "firmware.elf",
                boards=3, rfc2217=False, prefix="kill")
    try:
        n, done = 300, [0]

        def progress(label: str, total: int):
            def advance(k: int) -> None:
                done[0] += k
                if done[0] >= n // 3 and farm.qemus[1] is not None:
                    farm.kill_board(1)
                    farm.qemus[1] = None
            return advance if label == "device" else None

        report = validate_on_places(lab["prj"], _samples(lab["mlf"], n, seed=11), "kill-*",
                                    coordinator=farm.coordinator, tflite=lab["tflite"],
                                    litert=False, chunk_samples=8, progress=progress)
        runs = {r.name: r for r in report.places}
        assert runs["kill-1"].status == "failed" and runs["kill-1"].error
        assert runs["kill-0"].status == runs["kill-2"].status == "ok"
        assert sum(r.samples for r in runs.values()) == n
        (tflm,) = report.validation.comparison("tflm").outputs
        assert tflm.samples == n and tflm.exact == 1.0
        assert all(farm.holder(p) is None for p in farm.places)
    finally:
        farm.close()
        farm.assert_stopped()


def test_flash_through_labgrids_openocd_driver_golden_calls(lab: dict, tmp_path: Path) -> None:
    """``project-api flash prj -o labgrid_place=dbg-0`` on a place that exports an ST-LINK
    (NetworkUSBDebugger): the place is acquired for real, labgrid's RemotePlace finds the
    debugger through the coordinator and its OpenOCDDriver is driven; only what would go to
    the exporter host over SSH (copying the image, running OpenOCD) is replaced. Golden: the
    OpenOCD command line labgrid runs there. The place is released afterwards."""
    from unittest import mock

    from helpers.flash_doubles import F429, arm_elf

    from project_api.template import labgrid_place

    farm = lab["farm"]
    image = arm_elf(tmp_path / "build" / "firmware.elf", [(0x08000000, bytes(range(64)))])
    synced: list[str] = []

    class FakeManagedFile:
        def __init__(self, local_path: str, resource: object) -> None:
            self.local_path = local_path

        def sync_to_resource(self) -> None:
            synced.append(self.local_path)

        def get_remote_path(self) -> str:
            return f"/var/cache/labgrid/{Path(self.local_path).name}"

    ssh = ["ssh", "-x", "127.0.0.1", "--"]
    with mock.patch("labgrid.driver.openocddriver.ManagedFile", FakeManagedFile), \
            mock.patch("labgrid.resource.common.NetworkResource.command_prefix",
                       new_callable=mock.PropertyMock, return_value=ssh), \
            mock.patch("labgrid.driver.openocddriver.processwrapper.check_output",
                       return_value=b"") as run:
        assert labgrid_place.flash_with_labgrid(
            {"labgrid_place": "dbg-0", "labgrid_coordinator": farm.coordinator}, image, F429)
    script = image.parent / "labgrid-openocd.cfg"
    assert script.read_text() == "source [find target/stm32f4x.cfg]\n"
    assert synced == [str(image), str(script)]  # the image first (load), then the script
    run.assert_called_once()
    assert run.call_args.args[0] == ssh + [
        "openocd", "--command", "'adapter usb location \"1-1.4\"'", "--file",
        "interface/stlink.cfg", "--file", "/var/cache/labgrid/labgrid-openocd.cfg",
        "--command", "init", "--command", "'program /var/cache/labgrid/firmware.elf verify "
        "reset'", "--command", "exit"]
    assert farm.holder("dbg-0") is None
    # A place without a debugger, and a pyOCD remote probe given instead.
    with pytest.raises(ServerError, match="exports no USB debugger"):
        labgrid_place.flash_with_labgrid({"labgrid_place": "farm-1",
                                   "labgrid_coordinator": farm.coordinator}, image, F429)
    assert farm.holder("farm-1") is None
    assert not labgrid_place.flash_with_labgrid({"labgrid_place": "farm-1", "probe": "remote:h:5555"},
                                         image, F429)
