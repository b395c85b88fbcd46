"""``project-api devices`` with pyserial's comports() and pyOCD's probe list patched (no board
attached): ports with their boards.yaml boards, probes, --json; the labgrid part with a real
coordinator is in test_labgrid.py."""

from __future__ import annotations

import json
from unittest import mock

import pytest
import yaml
from helpers.serial_ports import NUCLEO_A, TTYS0, USB_UART, comports

from project_api.cli import devices
from project_api.cli import main as cli_main
from project_api.system import paths

ST_BOARDS = sorted(f"{template}/{name}" for template in ("stm32", "zephyr")
                   for name, b in yaml.safe_load((paths.template_dir(template) / "boards.yaml")
                                                 .read_text())["boards"].items()
                   if b.get("usb") == {"vid": 0x0483, "pid": 0x374B})


def _probe(unique_id: str, description: str) -> mock.Mock:
    return mock.Mock(unique_id=unique_id, description=description, vendor_name="STMicro",
                     product_name="STLink")


def test_board_usb_ids_come_from_every_template() -> None:
    ids = devices.board_usb_ids()
    assert sorted(ids[(0x0483, 0x374B)]) == ST_BOARDS
    assert {"stm32/nucleo_f429zi", "zephyr/nucleo_f746zg"} <= set(ST_BOARDS)


def test_devices_json(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LG_COORDINATOR", raising=False)
    probe = _probe("0670FF495351848777254629", "STM32 STLink NUCLEO-F429ZI")
    with comports(TTYS0, USB_UART, NUCLEO_A), mock.patch(
            "pyocd.core.helpers.ConnectHelper.get_all_connected_probes",
            return_value=[probe]) as listed:
        assert cli_main(["devices", "--json"]) == 0
    listed.assert_called_once_with(blocking=False, print_wait_message=False)
    data = json.loads(capsys.readouterr().out)
    ports = {p["port"]: p for p in data["serial_ports"]}
    assert ports["/dev/ttyACM0"] == {
        "port": "/dev/ttyACM0", "usb_id": "0483:374b",
        "serial_number": "0670FF495351848777254629", "description": "STM32 STLink",
        "boards": devices.board_usb_ids()[(0x0483, 0x374B)]}
    # a CP210x bridge: the USB-serial chip of the ESP32-C3-DevKitM-1, the one board that names it
    assert ports["/dev/ttyUSB0"]["boards"] == ["riscv/esp32c3_devkitm"]
    assert ports["/dev/ttyUSB0"]["usb_id"] == "10c4:ea60"
    assert ports["/dev/ttyS0"]["usb_id"] is None and ports["/dev/ttyS0"]["description"] is None
    assert data["debug_probes"] == [{"unique_id": "0670FF495351848777254629",
                                     "description": "STM32 STLink NUCLEO-F429ZI",
                                     "vendor": "STMicro", "product": "STLink"}]
    assert data["labgrid"] is None


def test_devices_text(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LG_COORDINATOR", raising=False)
    with comports(NUCLEO_A), mock.patch(
            "pyocd.core.helpers.ConnectHelper.get_all_connected_probes",
            side_effect=OSError("No backend available")):
        assert cli_main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "/dev/ttyACM0  0483:374b, serial 0670FF495351848777254629, STM32 STLink  boards: " \
           "stm32/" in out
    assert "pyOCD could not list probes: No backend available" in out
    assert "labgrid places: no coordinator (set LG_COORDINATOR or --coordinator)" in out


def test_devices_with_an_unreachable_coordinator(capsys: pytest.CaptureFixture) -> None:
    """A coordinator that does not answer is one error line naming it (nothing listens on
    port 1 of loopback)."""
    with comports():
        status = cli_main(["devices", "--no-probes", "--coordinator", "127.0.0.1:1"])
    err = capsys.readouterr().err
    assert status == 1
    assert "labgrid coordinator 127.0.0.1:1" in err


@pytest.mark.parametrize("address", ["no:port:here", "lab-pc:0", "lab-pc:99999", ":20408"])
def test_devices_with_a_malformed_coordinator(capsys: pytest.CaptureFixture, address: str) -> None:
    """Issue 35: `devices --coordinator no:port:here` was "internal error: ValueError"; now one
    usage line naming the address and the form wanted."""
    with comports():
        status = cli_main(["devices", "--no-probes", "--coordinator", address])
    err = capsys.readouterr().err
    assert status == 2
    assert "internal error" not in err
    assert err.count("\n") == 1
    assert f"the labgrid coordinator {address!r} is no HOST:PORT" in err
