"""The Project API wire protocol, in process: spec §1 and the conformance list of §7.1."""

from __future__ import annotations

import base64
import collections
import json
import pathlib
from unittest import mock

import pytest
from rpc_fixtures import BaseTestHandler, ClientServerFixture, mock_handler

from project_api import errors, server

FOO = server.ProjectOption("foo", optional=["build"], type="bool", help="Option foo")
BAR = server.ProjectOption(
    "bar", required=["generate_project"], type="str", choices=["qux"], help="Option bar"
)


def test_server_info_query():
    fixture = ClientServerFixture(
        mock_handler(
            server_info_query={
                "return_value": server.ServerInfo(
                    platform_name="platform_name",
                    is_template=True,
                    model_library_format_path=pathlib.Path("./model-library-format-path.sh"),
                    project_options=[FOO, BAR],
                )
            }
        )
    )
    reply = fixture.client.server_info_query("0.15.0")
    assert reply == {
        "platform_name": "platform_name",
        "is_template": True,
        "model_library_format_path": "model-library-format-path.sh",
        "project_options": [
            {
                "name": "foo",
                "choices": None,
                "default": None,
                "type": "bool",
                "required": None,
                "optional": ["build"],
                "help": "Option foo",
            },
            {
                "name": "bar",
                "choices": ["qux"],
                "default": None,
                "type": "str",
                "required": ["generate_project"],
                "optional": None,
                "help": "Option bar",
            },
        ],
        "protocol_version": 1,
    }
    assert list(reply) == [
        "platform_name",
        "is_template",
        "model_library_format_path",
        "project_options",
        "protocol_version",
    ]
    fixture.handler.server_info_query.assert_called_once_with("0.15.0")


def test_server_info_reply_bytes_are_json_dumps_defaults():
    fixture = ClientServerFixture(
        mock_handler(server_info_query={"return_value": server.ServerInfo("p", False, None, [FOO])})
    )
    ok, raw = fixture.raw_exchange(
        b'{"jsonrpc": "2.0", "method": "server_info_query", "params": {"tvm_version": "0.15.0"}, "id": 9}\n'
    )
    assert ok
    assert raw == (
        b'{"jsonrpc": "2.0", "id": 9, "result": {"platform_name": "p", "is_template": false, '
        b'"model_library_format_path": null, "project_options": [{"name": "foo", "choices": null, '
        b'"default": null, "type": "bool", "required": null, "optional": ["build"], '
        b'"help": "Option foo"}], "protocol_version": 1}}\n'
    )


def test_client_request_bytes():
    fixture = ClientServerFixture(mock_handler(build={"return_value": None}))
    sent = []
    fixture.client._testonly_did_write_request = lambda: (
        sent.append(bytes(fixture.client_to_server.buf)),
        fixture._serve(),
    )
    fixture.client.build({"bar": "baz"})
    fixture.client.build({})
    assert (
        sent[0]
        == b'{"jsonrpc": "2.0", "method": "build", "params": {"options": {"bar": "baz"}}, "id": 1}\n'
    )
    assert sent[1] == b'{"jsonrpc": "2.0", "method": "build", "params": {"options": {}}, "id": 2}\n'


def test_server_info_query_wrong_tvm_version():
    fixture = ClientServerFixture(
        mock_handler(server_info_query={"side_effect": server.UnsupportedTVMVersionError()})
    )
    with pytest.raises(server.UnsupportedTVMVersionError) as info:
        fixture.client.server_info_query("0.1.0")
    assert "UnsupportedTVMVersionError" in str(info.value)
    assert "Outermost server-side stack frame" in str(info.value)


def test_server_info_query_wrong_protocol_version():
    info_with_version = collections.namedtuple(
        "ServerInfoV", list(server.ServerInfo._fields) + ["protocol_version"]
    )
    fixture = ClientServerFixture(
        mock_handler(server_info_query={"return_value": info_with_version("p", True, None, [], 0)})
    )
    with pytest.raises(errors.UnsupportedProtocolVersionError) as info:
        fixture.client.server_info_query("0.15.0")
    assert str(info.value) == "microTVM API Server supports protocol version 0; want 1"


@pytest.mark.parametrize("method", ["build", "flash"])
def test_build_and_flash_get_options_by_keyword(method):
    fixture = ClientServerFixture(mock_handler(**{method: {"return_value": None}}))
    assert getattr(fixture.client, method)(options={"bar": "baz"}) is None
    getattr(fixture.handler, method).assert_called_once_with(options={"bar": "baz"})


def test_generate_project_gets_paths():
    fixture = ClientServerFixture(mock_handler(generate_project={"return_value": None}))
    fixture.client.generate_project("/a/model.tar", "/b/crt", "/c/proj", {"bar": "qux"})
    fixture.handler.generate_project.assert_called_once_with(
        pathlib.Path("/a/model.tar"),
        pathlib.Path("/b/crt"),
        pathlib.Path("/c/proj"),
        {"bar": "qux"},
    )


def test_open_transport():
    timeouts = server.TransportTimeouts(
        session_start_retry_timeout_sec=1.0,
        session_start_timeout_sec=2.0,
        session_established_timeout_sec=3.0,
    )
    fixture = ClientServerFixture(mock_handler(open_transport={"return_value": timeouts}))
    assert fixture.client.open_transport({"bar": "baz"}) == {
        "timeouts": {
            "session_start_retry_timeout_sec": 1.0,
            "session_start_timeout_sec": 2.0,
            "session_established_timeout_sec": 3.0,
        }
    }
    fixture.handler.open_transport.assert_called_once_with({"bar": "baz"})


def test_open_transport_with_endpoint():
    timeouts = server.TransportTimeouts(0, 0, 0)
    endpoint = {"type": "serial", "port": "/dev/ttyACM0", "baudrate": 115200}
    fixture = ClientServerFixture(
        mock_handler(open_transport={"return_value": {"timeouts": timeouts, "endpoint": endpoint}})
    )
    reply = fixture.client.open_transport({})
    assert list(reply) == ["timeouts", "endpoint"]
    assert reply["endpoint"] == endpoint
    assert reply["timeouts"]["session_start_timeout_sec"] == 0


def test_close_transport():
    fixture = ClientServerFixture(mock_handler(close_transport={"return_value": None}))
    assert fixture.client.close_transport() is None
    fixture.handler.close_transport.assert_called_once_with()


def test_read_transport():
    fixture = ClientServerFixture(mock_handler(read_transport={"return_value": b"foo\x1b"}))
    assert fixture.client.read_transport(128, 5.0) == {"data": b"foo\x1b"}
    fixture.handler.read_transport.assert_called_with(128, 5.0)
    # The golden base85 text is on the wire.
    ok, raw = fixture.raw_exchange(
        b'{"jsonrpc": "2.0", "method": "read_transport", "params": {"n": 128, "timeout_sec": 5.0}, "id": 2}\n'
    )
    assert raw == b'{"jsonrpc": "2.0", "id": 2, "result": {"data": "W^ZpB"}}\n'

    fixture.handler.read_transport.side_effect = server.IoTimeoutError
    with pytest.raises(server.IoTimeoutError):
        fixture.client.read_transport(256, 0.0)
    fixture.handler.read_transport.side_effect = server.TransportClosedError
    with pytest.raises(server.TransportClosedError):
        fixture.client.read_transport(512, 10.0)
    assert fixture.handler.read_transport.call_count == 4


def test_write_transport():
    fixture = ClientServerFixture(mock_handler(write_transport={"return_value": 3}))
    assert fixture.client.write_transport(b"foo", 5.0) is None
    fixture.handler.write_transport.assert_called_with(b"foo", 5.0)

    fixture.handler.write_transport.side_effect = server.IoTimeoutError
    with pytest.raises(server.IoTimeoutError):
        fixture.client.write_transport(b"bar", 0.0)
    fixture.handler.write_transport.side_effect = server.TransportClosedError
    with pytest.raises(server.TransportClosedError):
        fixture.client.write_transport(b"baz", 10.0)
    assert fixture.handler.write_transport.call_count == 3


class ParticularError(Exception):
    pass


def test_method_raises_error():
    fixture = ClientServerFixture(
        mock_handler(close_transport={"side_effect": ParticularError("it broke")})
    )
    with pytest.raises(server.ServerError) as info:
        fixture.client.close_transport()
    err = info.value
    assert type(err) is server.ServerError
    assert err.message == "calling method close_transport"
    assert "ParticularError" in str(err)
    assert "it broke" in err.data["traceback"]
    assert "# <--- Outermost server-side stack frame" in err.data["traceback"]


def test_method_not_found():
    fixture = ClientServerFixture(BaseTestHandler())
    with pytest.raises(server.JSONRPCError) as info:
        fixture.client._request_reply("invalid_method", {"bar": None})
    assert info.value.code == server.ErrorCode.METHOD_NOT_FOUND
    assert info.value.message == "invalid_method: no such method"


def test_extra_param():
    fixture = ClientServerFixture(BaseTestHandler())
    with pytest.raises(server.JSONRPCError) as info:
        fixture.client._request_reply("build", {"invalid_param_name": None, "options": {}})
    assert info.value.code == server.ErrorCode.INVALID_PARAMS
    assert "build: extra parameters: invalid_param_name" in info.value.message
    with pytest.raises(server.JSONRPCError) as info:
        fixture.client._request_reply(
            "open_transport", {"invalid_param_name": None, "x": 1, "options": {}}
        )
    assert info.value.code == server.ErrorCode.INVALID_PARAMS
    assert info.value.message == "open_transport: extra parameters: invalid_param_name, x"


def test_missing_param():
    fixture = ClientServerFixture(BaseTestHandler())
    for method in ("build", "open_transport"):
        with pytest.raises(server.JSONRPCError) as info:
            fixture.client._request_reply(method, {})
        assert info.value.code == server.ErrorCode.INVALID_PARAMS
        assert info.value.message == f"method {method}: parameter options not given"


def test_incorrect_param_type():
    fixture = ClientServerFixture(BaseTestHandler())
    with pytest.raises(server.JSONRPCError) as info:
        fixture.client._request_reply("build", {"options": None})
    assert info.value.code == server.ErrorCode.INVALID_PARAMS
    assert (
        "build: parameter options: want <class 'dict'>, got <class 'NoneType'>"
        in info.value.message
    )


@pytest.mark.parametrize(
    "method,params,message",
    [
        (
            "read_transport",
            {"n": "1", "timeout_sec": None},
            "method read_transport: parameter n: want <class 'int'>, got <class 'str'>",
        ),
        (
            "read_transport",
            {"n": True, "timeout_sec": None},
            "method read_transport: parameter n: want <class 'int'>, got <class 'bool'>",
        ),
        (
            "read_transport",
            {"n": 0, "timeout_sec": None},
            "method read_transport: parameter n: want at least 1, got 0",
        ),
        (
            "read_transport",
            {"n": 4, "timeout_sec": "soon"},
            "method read_transport: parameter timeout_sec: want <class 'float'> or None, got <class 'str'>",
        ),
        (
            "write_transport",
            {"data": "W^Z", "timeout_sec": -1},
            "method write_transport: parameter timeout_sec: want >= 0 or None, got -1",
        ),
        (
            "write_transport",
            {"data": "\"'\\", "timeout_sec": 1},
            "method write_transport: parameter data: not valid base85 (bad base85 character at position 0)",
        ),
        (
            "server_info_query",
            {"tvm_version": 15},
            "method server_info_query: parameter tvm_version: want <class 'str'>, got <class 'int'>",
        ),
        (
            "generate_project",
            {
                "model_library_format_path": "a",
                "standalone_crt_dir": None,
                "project_dir": "c",
                "options": {},
            },
            "method generate_project: parameter standalone_crt_dir: want <class 'str'>, got <class 'NoneType'>",
        ),
    ],
)
def test_every_method_checks_param_types(method, params, message):
    fixture = ClientServerFixture(BaseTestHandler())
    with pytest.raises(server.JSONRPCError) as info:
        fixture.client._request_reply(method, params)
    assert info.value.code == server.ErrorCode.INVALID_PARAMS
    assert info.value.message == message


INVALID_REQUESTS = [
    (b"1\n", "request: want dict; got 1"),
    (b'{"jsonrpc": 1.0}\n', 'request["jsonrpc"]: want "2.0"; got 1.0'),
    (b'{"jsonrpc": "2.0", "method": 123}\n', 'request["method"]: want str; got 123'),
    (
        b'{"jsonrpc": "2.0", "method": "bar!"}\n',
        "request[\"method\"]: should match regex ^[a-zA-Z0-9_]+$; got 'bar!'",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "bar", "params": 123}\n',
        "request[\"params\"]: want dict; got <class 'int'>",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "bar", "params": {}, "id": {}}\n',
        'request["id"]: want str, number, null; got {}',
    ),
]


def _assert_still_serving(fixture: ClientServerFixture) -> None:
    fixture.handler.build = mock.Mock(return_value=None)
    assert fixture.client.build({"a": 1}) is None
    assert fixture.served[-1] is True


@pytest.mark.parametrize("raw,message", INVALID_REQUESTS)
def test_invalid_request_gets_reference_error_and_server_keeps_serving(raw, message):
    fixture = ClientServerFixture(BaseTestHandler())
    ok, reply = fixture.raw_json(raw)
    assert ok is True
    assert reply == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": message, "data": None},
    }
    _assert_still_serving(fixture)


@pytest.mark.parametrize("raw", [b"foobar\n", b'{"jsonrpc": \n', b"\xff\xfe\n", b"\n"])
def test_unparseable_request_gets_parse_error_and_server_keeps_serving(raw):
    fixture = ClientServerFixture(BaseTestHandler())
    ok, raw_reply = fixture.raw_exchange(raw)
    assert ok is True
    assert raw_reply.startswith(
        b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "request: invalid JSON: '
    )
    assert raw_reply.endswith(b'", "data": null}}\n')
    _assert_still_serving(fixture)


@pytest.mark.parametrize(
    "params",
    [{}, {"options": {}, "extra": 1}, {"options": []}],
    ids=["missing", "extra", "wrong-type"],
)
def test_server_keeps_serving_after_bad_params(params):
    fixture = ClientServerFixture(BaseTestHandler())
    with pytest.raises(server.JSONRPCError):
        fixture.client._request_reply("flash", params)
    assert fixture.served[-1] is True
    with pytest.raises(server.JSONRPCError):
        fixture.client._request_reply("no_such_method", {})
    _assert_still_serving(fixture)


def test_eof_stops_the_server_without_reply():
    fixture = ClientServerFixture(BaseTestHandler())
    ok, reply = fixture.raw_exchange(b"")
    assert ok is False
    assert reply == b""


def test_notification_runs_but_gets_no_reply():
    fixture = ClientServerFixture(mock_handler(build={"return_value": None}))
    ok, reply = fixture.raw_exchange(
        b'{"jsonrpc": "2.0", "method": "build", "params": {"options": {"n": 1}}}\n'
    )
    assert ok is True
    assert reply == b""
    fixture.handler.build.assert_called_once_with(options={"n": 1})
    # Even a failing notification stays silent.
    ok, reply = fixture.raw_exchange(b'{"jsonrpc": "2.0", "method": "nope", "params": {}}\n')
    assert (ok, reply) == (True, b"")
    _assert_still_serving(fixture)


def test_error_reply_key_order_and_id():
    fixture = ClientServerFixture(BaseTestHandler())
    ok, raw = fixture.raw_exchange(
        b'{"jsonrpc": "2.0", "method": "nope", "params": {}, "id": "abc"}\n'
    )
    assert raw == (
        b'{"jsonrpc": "2.0", "id": "abc", "error": {"code": -32601, "message": "nope: no such method", '
        b'"data": null}}\n'
    )


def test_server_error_subclass_on_the_wire():
    fixture = ClientServerFixture(mock_handler(flash={"side_effect": server.IoTimeoutError()}))
    ok, reply = fixture.raw_json(
        b'{"jsonrpc": "2.0", "method": "flash", "params": {"options": {}}, "id": 4}\n'
    )
    assert list(reply) == ["jsonrpc", "id", "error"]
    assert reply["id"] == 4
    assert list(reply["error"]) == ["code", "message", "data"]
    assert reply["error"]["code"] == -32000
    assert reply["error"]["message"] == "IoTimeoutError"
    assert "Outermost server-side stack frame" in reply["error"]["data"]["traceback"]


def test_unserializable_result_is_an_internal_error_not_a_crash():
    fixture = ClientServerFixture(mock_handler(build={"return_value": object()}))
    with pytest.raises(server.JSONRPCError) as info:
        fixture.client.build({})
    assert info.value.code == server.ErrorCode.INTERNAL_ERROR
    assert "not JSON-serializable" in info.value.message
    _assert_still_serving(fixture)


def test_client_rejects_mismatched_id_and_malformed_replies():
    fixture = ClientServerFixture(BaseTestHandler())
    replies = iter(
        [
            b'{"jsonrpc": "2.0", "id": 99, "result": null}\n',
            b'{"jsonrpc": "1.0", "id": 2, "result": null}\n',
            b'{"jsonrpc": "2.0", "id": 3}\n',
            b"not json\n",
            b"[1, 2]\n",
            b'{"jsonrpc": "2.0", "id": 6, "error": {"code": -1234, "message": "odd", "data": null}}\n',
            b'{"jsonrpc": "2.0", "id": 7, "error": {"code": -32000, "message": "SomethingNew", "data": null}}\n',
        ]
    )
    fixture.client._testonly_did_write_request = lambda: (
        fixture.client_to_server.take(),
        fixture.server_to_client.write(next(replies)),
    )
    with pytest.raises(errors.MismatchedIdError):
        fixture.client.build({})
    for _ in range(4):
        with pytest.raises(errors.MalformedReplyError):
            fixture.client.build({})
    with pytest.raises(errors.JSONRPCError) as info:
        fixture.client.build({})
    assert type(info.value) is errors.JSONRPCError and info.value.code == -1234
    with pytest.raises(errors.ServerError) as info:
        fixture.client.build({})
    assert type(info.value) is errors.ServerError and info.value.message == "SomethingNew"


def test_client_eof_and_shutdown():
    fixture = ClientServerFixture(BaseTestHandler())
    fixture.client._testonly_did_write_request = lambda: None
    with pytest.raises(errors.ConnectionShutdownError) as info:
        fixture.client.build({})
    assert str(info.value) == "got EOF reading reply from API server"
    assert fixture.client.is_shutdown
    with pytest.raises(errors.ConnectionShutdownError) as info:
        fixture.client.build({})
    assert str(info.value) == "connection already closed"


# --- options ---------------------------------------------------------------------------------


def test_project_option_golden_dict():
    opt = server.ProjectOption("foo", optional=["build"], type="bool", help="Option foo")
    assert json.dumps(opt._asdict()) == (
        '{"name": "foo", "choices": null, "default": null, "type": "bool", "required": null, '
        '"optional": ["build"], "help": "Option foo"}'
    )
    assert opt.replace({"default": True}).default is True
    assert opt.default is None


@pytest.mark.parametrize(
    "kwargs,error",
    [
        ({"optional": ["build"], "help": "h"}, TypeError),
        ({"type": "bool", "optional": ["build"]}, TypeError),
        ({"type": "bool", "help": "h"}, ValueError),
        ({"type": "float", "optional": ["build"], "help": "h"}, ValueError),
        ({"type": "str", "required": "build", "help": "h"}, ValueError),
        ({"type": "str", "optional": ["build"], "choices": "ab", "help": "h"}, ValueError),
    ],
)
def test_project_option_validation(kwargs, error):
    with pytest.raises(error):
        server.ProjectOption("x", **kwargs)


def test_project_option_fields_keyword_only():
    with pytest.raises(TypeError):
        server.ProjectOption("x", None, None, "bool", None, ["build"], "help")


def test_default_project_options():
    options = server.default_project_options()
    names = [o.name for o in options]
    assert names == [
        "verbose",
        "project_type",
        "board",
        "cmsis_path",
        "warning_as_error",
        "compile_definitions",
        "extra_files_tar",
    ]
    by_name = {o.name: o for o in options}
    assert (
        by_name["verbose"].optional == ["generate_project"] and by_name["verbose"].default is False
    )
    assert by_name["warning_as_error"].optional == ["generate_project"]
    assert by_name["project_type"].required == ["generate_project"]
    assert by_name["board"].required == ["generate_project"]
    assert by_name["board"].help == "Name of the board to build for."


def test_modified_project_options():
    options = server.default_project_options(
        verbose={"optional": ["flash"], "required": ["build"]},
        board={"choices": ["board1", "board2"]},
    )
    by_name = {o.name: o for o in options}
    assert by_name["verbose"].optional == ["flash"]
    assert by_name["verbose"].required == ["build"]
    assert by_name["board"].choices == ["board1", "board2"]
    with pytest.raises(ValueError, match="^Option nope was not found in default ProjectOptions.$"):
        server.default_project_options(nope={"default": 1})


def test_error_classes_are_reexported():
    assert server.IoTimeoutError is errors.IoTimeoutError
    assert server.TransportClosedError is errors.TransportClosedError
    assert server.UnsupportedTVMVersionError is errors.UnsupportedTVMVersionError
    assert server.ServerError is errors.ServerError
    assert server.JSONRPCError is errors.JSONRPCError
    assert server.ErrorCode.INVALID_PARAMS == -32602


def test_main_honours_argv():
    import os
    import threading

    from project_api.api import client

    server_read, client_write = os.pipe()
    client_read, server_write = os.pipe()
    handler = mock_handler(
        server_info_query={"return_value": server.ServerInfo("argv", True, None, [])}
    )
    thread = threading.Thread(
        target=server.main,
        args=(handler, ["--read-fd", str(server_read), "--write-fd", str(server_write)]),
    )
    thread.start()
    api = client.ProjectAPIClient(
        os.fdopen(client_read, "rb", buffering=0), os.fdopen(client_write, "wb", buffering=0)
    )
    assert api.server_info_query("0.15.0")["platform_name"] == "argv"
    api.shutdown()
    thread.join(5)
    assert not thread.is_alive()


def test_main_rejects_a_closed_fd(capsys):
    import os

    r, w = os.pipe()
    os.close(r)
    os.close(w)
    with pytest.raises(SystemExit) as info:
        server.main(BaseTestHandler(), ["--read-fd", str(r), "--write-fd", str(w)])
    assert info.value.code == 2
    assert f"fd {r} is not open" in capsys.readouterr().err


@pytest.mark.parametrize(
    "value",
    [
        None,
        0,
        -7,
        2**70,
        1.0,
        5.0,
        0.1,
        1e-7,
        1e22,
        -0.0,
        float("nan"),
        float("inf"),
        True,
        False,
        "plain",
        'quote"back\\slash',
        "é",
        server.Base85Text("W^ZpB"),
        {},
        {"n": 1, "timeout_sec": None},
        {"data": server.Base85Text("{{Q_00000000L%r"), "timeout_sec": 0.25},
        {"n": 3, "x": True},
        {"weird key": 1},
        {'k"': 1},
        {"options": {"a": [1, 2]}},
        {1: 2},
        [1, None],
        {"f": float("-inf")},
    ],
)
def test_json_dumps_fast_path_matches_json_dumps(value):
    assert server.json_dumps(value) == json.dumps(value)


def test_transport_requests_and_replies_match_json_dumps():
    fixture = ClientServerFixture(
        mock_handler(
            read_transport={"return_value": bytes(range(256))},
            write_transport={"return_value": None},
        )
    )
    sent = []
    fixture.client._testonly_did_write_request = lambda: (
        sent.append(bytes(fixture.client_to_server.buf)),
        fixture._serve(),
        sent.append(bytes(fixture.server_to_client.buf)),
    )
    data = bytes(range(200))
    fixture.client.write_transport(data, 0.5)
    assert fixture.client.read_transport(300, None) == {"data": bytes(range(256))}
    text_in = base64.b85encode(data).decode()
    text_out = base64.b85encode(bytes(range(256))).decode()
    assert sent == [
        (
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "write_transport",
                    "params": {"data": text_in, "timeout_sec": 0.5},
                    "id": 1,
                }
            )
            + "\n"
        ).encode(),
        (json.dumps({"jsonrpc": "2.0", "id": 1, "result": None}) + "\n").encode(),
        (
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "read_transport",
                    "params": {"n": 300, "timeout_sec": None},
                    "id": 2,
                }
            )
            + "\n"
        ).encode(),
        (json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"data": text_out}}) + "\n").encode(),
    ]


def test_wire_parameter_table_matches_the_handler_interface():
    import inspect

    abstract = {
        name
        for name, value in vars(server.ProjectAPIHandler).items()
        if getattr(value, "__isabstractmethod__", False)
    }
    assert abstract == set(server._WIRE_TYPES)
    for name, params in server._WIRE_TYPES.items():
        signature = inspect.signature(getattr(server.ProjectAPIHandler, name))
        assert list(signature.parameters)[1:] == list(params), name


def test_client_skips_the_reply_of_an_interrupted_call():
    fixture = ClientServerFixture(
        mock_handler(build={"return_value": "first"}, flash={"return_value": "second"})
    )

    def serve_then_interrupt():
        fixture._serve()
        raise KeyboardInterrupt

    fixture.client._testonly_did_write_request = serve_then_interrupt
    with pytest.raises(KeyboardInterrupt):
        fixture.client.build({})
    fixture.client._testonly_did_write_request = fixture._serve
    # The stale reply to build (id 1) is still queued ahead of flash's (id 2).
    assert fixture.client.flash({}) == "second"
    assert fixture.server_to_client.buf == b""


def test_fd_server_handles_pipelined_and_split_requests():
    import os
    import threading
    import time

    server_read, client_write = os.pipe()
    client_read, server_write = os.pipe()
    handler = mock_handler(build={"side_effect": lambda options: options["k"]})
    read_file = os.fdopen(server_read, "rb", buffering=0)
    write_file = os.fdopen(server_write, "wb", buffering=0)
    srv = server.ProjectAPIServer(read_file, write_file, handler)
    thread = threading.Thread(target=srv.serve_forever)
    thread.start()
    req = '{"jsonrpc": "2.0", "method": "build", "params": {"options": {"k": %d}}, "id": %d}\n'
    os.write(client_write, ((req % (1, 1)) + (req % (2, 2))).encode())
    split = (req % (3, 3)).encode()
    os.write(client_write, split[:10])
    time.sleep(0.05)
    os.write(client_write, split[10:])
    os.close(client_write)
    thread.join(5)
    assert not thread.is_alive()
    read_file.close()
    write_file.close()  # the server does not close the files it was given; main() does
    with os.fdopen(client_read, "rb") as f:
        replies = f.read().decode().splitlines()
    assert replies == [f'{{"jsonrpc": "2.0", "id": {i}, "result": {i}}}' for i in (1, 2, 3)]
