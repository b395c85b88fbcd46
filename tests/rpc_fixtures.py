"""Test doubles shared by the rpc-core tests: in-memory pipes and an in-process client/server pair."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

from project_api import server
from project_api.api import client


class MemPipe:
    """A one-way in-memory byte pipe with the file methods the client and server use."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.closed = False

    def write(self, data: bytes) -> int:
        self.buf += data
        return len(data)

    def flush(self) -> None:
        pass

    def readline(self) -> bytes:
        nl = self.buf.find(b"\n")
        end = len(self.buf) if nl < 0 else nl + 1
        line = bytes(self.buf[:end])
        del self.buf[:end]
        return line

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        data = bytes(self.buf)
        self.buf.clear()
        return data


class BaseTestHandler(server.ProjectAPIHandler):
    """Implements every method by failing, so each test mocks only what it exercises."""

    def server_info_query(self, tvm_version):
        raise NotImplementedError

    def generate_project(self, model_library_format_path, standalone_crt_dir, project_dir, options):
        raise NotImplementedError

    def build(self, options):
        raise NotImplementedError

    def flash(self, options):
        raise NotImplementedError

    def open_transport(self, options):
        raise NotImplementedError

    def close_transport(self):
        raise NotImplementedError

    def read_transport(self, n, timeout_sec):
        raise NotImplementedError

    def write_transport(self, data, timeout_sec):
        raise NotImplementedError


class ClientServerFixture:
    """A client and a server in one process: each request is served as soon as it is written."""

    def __init__(self, handler: server.ProjectAPIHandler):
        self.handler = handler
        self.client_to_server = MemPipe()
        self.server_to_client = MemPipe()
        self.server = server.ProjectAPIServer(self.client_to_server, self.server_to_client, handler)
        self.client = client.ProjectAPIClient(
            self.server_to_client,
            self.client_to_server,
            testonly_did_write_request=self._serve,
        )
        self.served: list[bool] = []

    def _serve(self) -> None:
        self.served.append(self.server.serve_one_request())

    def raw_exchange(self, request: bytes) -> tuple[bool, bytes]:
        """Send raw request bytes; return (serve_one_request's result, the raw reply bytes)."""
        self.client_to_server.write(request)
        keep_going = self.server.serve_one_request()
        return keep_going, self.server_to_client.take()

    def raw_json(self, request: bytes) -> tuple[bool, Any]:
        keep_going, reply = self.raw_exchange(request)
        assert reply.endswith(b"\n") and reply.count(b"\n") == 1, reply
        return keep_going, json.loads(reply)


def mock_handler(**methods: Any) -> BaseTestHandler:
    """A BaseTestHandler whose named methods are Mocks (with the given return_value/side_effect)."""
    handler = BaseTestHandler()
    for name, config in methods.items():
        setattr(handler, name, mock.Mock(**config))
    return handler
