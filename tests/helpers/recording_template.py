"""Template servers that record every call they receive (``calls.jsonl`` beside them), so a
test can prove what reached a server and what never did.

* :data:`RECORDING_SERVER`: a microTVM-style server (``server.ProjectAPIHandler`` directly): it
  checks nothing and keeps no options file, so our client fills in defaults for it;
* :data:`LIBRARY_SERVER`: a server on our template library (``TemplateHandler``), which checks
  options itself; it records the options each call carries and the values the step runs with.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

RECORDING_SERVER = textwrap.dedent('''
    """A template that records every call (tests only)."""
    import json
    import pathlib
    import shutil

    from project_api import server

    HERE = pathlib.Path(__file__).resolve().parent
    IS_TEMPLATE = not (HERE / "model.tar").exists()
    OPTIONS = [
        server.ProjectOption("project_type", type="str", required=["generate_project"],
                             choices=["host_driven", "standalone"], help="What to generate."),
        server.ProjectOption("verbose", type="bool", optional=["build"], default=False,
                             help="Verbose build."),
        server.ProjectOption("workspace_size_bytes", type="int", optional=["generate_project"],
                             default=2048, help="Pool size."),
        server.ProjectOption("serial_number", type="str", required=["flash"],
                             help="Board to flash."),
        server.ProjectOption("fail_generate", type="bool", optional=["generate_project"],
                             default=False, help="Fail half-way through generation."),
        server.ProjectOption("fail_build", type="bool", optional=["build"], default=False,
                             help="Fail the build."),
    ]


    def record(method, payload):
        with open(HERE / "calls.jsonl", "a") as f:
            f.write(json.dumps({"method": method, "payload": payload}) + "\\n")


    class Handler(server.ProjectAPIHandler):
        def __init__(self):
            super().__init__()
            self._buf = None

        def server_info_query(self, tvm_version):
            record("server_info_query", tvm_version)
            return server.ServerInfo(
                platform_name="recording", is_template=IS_TEMPLATE,
                model_library_format_path="" if IS_TEMPLATE else str(HERE / "model.tar"),
                project_options=OPTIONS)

        def generate_project(self, mlf, crt_dir, project_dir, options):
            record("generate_project", {"mlf": str(mlf), "crt": str(crt_dir),
                                        "project_dir": str(project_dir), "options": options})
            project_dir.mkdir(parents=True)
            shutil.copy2(__file__, project_dir / "microtvm_api_server.py")
            (project_dir / "half.txt").write_text("partial")
            if options.get("fail_generate"):
                raise RuntimeError("generation failed half-way (fail_generate)")
            shutil.copy2(mlf, project_dir / "model.tar")

        def build(self, options):
            record("build", options)
            if options.get("fail_build"):
                raise RuntimeError("compiler exploded")

        def flash(self, options):
            record("flash", options)

        def open_transport(self, options):
            record("open_transport", options)
            self._buf = bytearray()
            return server.TransportTimeouts(0, 0, 0)

        def close_transport(self):
            record("close_transport", None)
            self._buf = None

        def read_transport(self, n, timeout_sec):
            if self._buf is None:
                raise server.TransportClosedError()
            if not self._buf:
                raise server.IoTimeoutError()
            data = bytes(self._buf[:n])
            del self._buf[:n]
            return data

        def write_transport(self, data, timeout_sec):
            if self._buf is None:
                raise server.TransportClosedError()
            self._buf += data


    if __name__ == "__main__":
        server.main(Handler())
''')


def write_template(directory: Path, server_text: str) -> Path:
    """A template directory at ``directory`` whose server script is ``server_text``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "microtvm_api_server.py").write_text(server_text)
    return directory


def write_recording_template(directory: Path) -> Path:
    return write_template(directory, RECORDING_SERVER)


def calls(directory: Path) -> list[dict]:
    path = directory / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def methods(directory: Path) -> list[str]:
    return [c["method"] for c in calls(directory)]


LIBRARY_SERVER = textwrap.dedent('''
    """A template on project_api.template that records what each step is sent (tests only)."""
    import json
    import pathlib

    from project_api import server
    from project_api.template import TemplateHandler, option

    HERE = pathlib.Path(__file__).resolve().parent


    def record(method, payload):
        with open(HERE / "calls.jsonl", "a") as f:
            f.write(json.dumps({"method": method, "payload": payload}) + "\\n")


    class Handler(TemplateHandler):
        PLATFORM_NAME = "library"
        OPTIONS = [
            option("level", "int", default=1, minimum=0, optional=["generate_project", "build"],
                   help="A level."),
            option("name", "str", optional=["generate_project"], help="A name."),
        ]

        def render(self, project):
            pass

        def build(self, options):
            record("build", options)
            super().build(options)

        def do_build(self, values):
            record("build_values", values)


    if __name__ == "__main__":
        server.main(Handler())
''')


def write_library_template(directory: Path) -> Path:
    return write_template(directory, LIBRARY_SERVER)
