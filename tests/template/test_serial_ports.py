"""project_api/template/serial_ports.py with comports() patched (no board attached), and the stm32
server's open_transport on a real-board project whose port is pyserial's loop:// URL."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.serial_ports import NUCLEO_A, NUCLEO_B, ST, TTYS0, USB_UART, comports

from project_api.api.project import generate_project
from project_api.api.transport import ProjectTransport
from project_api.emit import emit
from project_api.errors import ServerError
from project_api.template import serial_ports


def test_describe_port() -> None:
    assert serial_ports.describe_port(NUCLEO_A) == \
        "/dev/ttyACM0 (0483:374b, serial 0670FF495351848777254629, STM32 STLink)"
    assert serial_ports.describe_port(TTYS0) == "/dev/ttyS0 (no USB ID, no serial)"


def test_no_port_lists_every_port_present() -> None:
    with comports(TTYS0, USB_UART), pytest.raises(ServerError) as info:
        serial_ports.find_port(*ST, what="nucleo_f429zi's ST-LINK")
    assert info.value.message == (
        "no serial port of nucleo_f429zi's ST-LINK (USB ID 0483:374b); ports present: "
        "/dev/ttyS0 (no USB ID, no serial); /dev/ttyUSB0 (10c4:ea60, serial 0001, CP2102 USB to "
        "UART Bridge Controller); connect the board by USB or pass -o serial_port=PORT")
    with comports(), pytest.raises(ServerError, match="; ports present: none; connect"):
        serial_ports.find_port(*ST)


def test_one_port() -> None:
    with comports(TTYS0, USB_UART, NUCLEO_A):
        assert serial_ports.find_port(*ST) == "/dev/ttyACM0"


def test_several_ports_list_the_candidates() -> None:
    with comports(TTYS0, NUCLEO_A, NUCLEO_B), pytest.raises(ServerError) as info:
        serial_ports.find_port(*ST, what="the board")
    assert info.value.message == (
        "2 serial ports match the board (USB ID 0483:374b): /dev/ttyACM0 (0483:374b, serial "
        "0670FF495351848777254629, STM32 STLink); /dev/ttyACM1 (0483:374b, serial "
        "066DFF555185754867081234, STM32 STLink); pass -o serial_number=... or "
        "-o serial_port=...")
    assert "\n" not in info.value.message


def test_serial_number_picks_the_port() -> None:
    with comports(NUCLEO_A, NUCLEO_B):
        assert serial_ports.find_port(*ST, "066DFF555185754867081234") == "/dev/ttyACM1"
        assert serial_ports.find_port(*ST, "0670ff4953") == "/dev/ttyACM0"  # as pyOCD matches
        with pytest.raises(ServerError) as info:
            serial_ports.find_port(*ST, "1234XYZ")
    assert info.value.message.startswith("no serial port of the board (USB ID 0483:374b and "
                                         "serial number 1234XYZ); ports present: /dev/ttyACM0 ")


def test_override_and_boards_without_usb_ids() -> None:
    with comports() as listing:
        assert serial_ports.board_port({"vid": ST[0], "pid": ST[1]}, "/dev/ttyACM7", None) == \
            "/dev/ttyACM7"
        listing.assert_not_called()
    with comports(NUCLEO_A):
        assert serial_ports.board_port({"vid": ST[0], "pid": ST[1]}, None, None) == "/dev/ttyACM0"
    with pytest.raises(ServerError, match="has no USB IDs in boards.yaml .*; pass -o "
                                          "serial_port=PORT"):
        serial_ports.board_port(None, None, None)


def test_uart_that_cannot_open_is_one_line(tmp_path: Path) -> None:
    transport = serial_ports.UartTransport(str(tmp_path / "ttyACM9"))
    with pytest.raises(ServerError) as info:
        transport.open()
    message = info.value.message
    assert message.startswith(f"open_transport: cannot open {tmp_path / 'ttyACM9'}: ")
    assert message.endswith("; check the board is connected and no other program holds the port")
    assert "\n" not in message
    assert transport.timeouts() == serial_ports.UART_TIMEOUTS


# --- the stm32 server on a real board ------------------------------------------------------------


@pytest.fixture(scope="module")
def nucleo_project(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("serial_ports")
    mlf = emit(models_dir / "hello_world_int8.tflite", out / "hello.tar", name="default")
    project = generate_project("stm32", mlf.path, out / "prj", {"board": "nucleo_f429zi"})
    project.close()
    return out / "prj"


def test_open_transport_on_loop_url(nucleo_project: Path) -> None:
    from project_api.api.project import GeneratedProject

    with GeneratedProject.from_directory(nucleo_project, {"serial_port": "loop://"}) as project:
        client = project.client
        reply = client.open_transport({"serial_port": "loop://", "baud_rate": 115200})
        assert reply["endpoint"] == {"type": "serial", "port": "loop://", "baudrate": 115200}
        assert reply["timeouts"] == {"session_start_retry_timeout_sec": 2.0,
                                     "session_start_timeout_sec": 10.0,
                                     "session_established_timeout_sec": 10.0}
        client.write_transport(b"through the loop", 1.0)
        got = b""
        while len(got) < 16:
            got += client.read_transport(16 - len(got), 1.0)["data"]
        assert got == b"through the loop"
        client.close_transport()
        transport = ProjectTransport(client, project.options, use_endpoint=False,
                                     shutdown_client=False)
        with transport:  # the options the project was opened with reach open_transport
            assert transport.timeouts().session_start_timeout_sec == 10.0
            transport.write(b"\x00\xff", 1.0)
            assert transport.read(2, 1.0) == b"\x00\xff"


def test_open_transport_without_a_board_lists_ports(nucleo_project: Path) -> None:
    from project_api.api.project import GeneratedProject

    with GeneratedProject.from_directory(nucleo_project,
                                         {"serial_number": "none0"}) as project:
        with pytest.raises(ServerError) as info:
            project.client.open_transport(project.options)
    assert "no serial port of nucleo_f429zi's ST-LINK (USB ID 0483:374b and serial number " \
           "none0); ports present: " in str(info.value)


def test_baud_rate_reaches_the_firmware_and_the_host(models_dir: Path, tmp_path: Path) -> None:
    """The generated baud rate is compiled into the firmware and kept by open_transport when
    the call gives none; a value the call gives wins, the option's default too (it sets the host
    side back: the server no longer drops a value equal to the default)."""
    mlf = emit(models_dir / "hello_world_int8.tflite", tmp_path / "hello.tar", name="default")
    with generate_project("stm32", mlf.path, tmp_path / "prj",
                          {"board": "nucleo_f429zi", "baud_rate": 921600}) as project:
        assert "#define BOARD_UART_BAUDRATE 921600u" in (tmp_path / "prj/src/board.h").read_text()
        for given, want in ((None, 921600), (230400, 230400), (115200, 115200)):
            options = {"serial_port": "loop://", **({"baud_rate": given} if given else {})}
            assert project.client.open_transport(options)["endpoint"]["baudrate"] == want
            project.client.close_transport()
