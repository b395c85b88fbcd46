"""``project-api templates``: list the built-in template projects and their options."""

from __future__ import annotations

from typing import Any

from project_api.api.project import TemplateProject, builtin_templates
from project_api.cli.base import Subcommand, format_options
from project_api.errors import ProjectAPIError


class TemplatesCommand(Subcommand):
    NAMES = ["templates"]
    HELP = "List the built-in template projects, their platforms and options."
    DESCRIPTION = (
        "List the built-in template projects (the folders of the templates directory that hold a "
        "microtvm_api_server.py). Each template's server is started to ask for its platform "
        "and options, then stopped."
    )
    EPILOG = """\
examples:
  project-api templates
  project-api templates --json | jq '.[].name'
  project-api generate --template host --help    # one template's options, in generate's help"""

    def invoke(self) -> int:
        entries: list[dict[str, Any]] = []
        for name, path in builtin_templates().items():
            entry: dict[str, Any] = {"name": name, "path": str(path)}
            try:
                with TemplateProject.from_directory(path, debug=self.verbosity >= 2) as tpl:
                    entry["platform"] = tpl.platform_name
                    entry["options"] = tpl.project_options
            except (ProjectAPIError, OSError) as exc:
                entry["error"] = " ".join(str(exc).split())[:300]
            entries.append(entry)

        def text() -> str:
            if not entries:
                return "no built-in templates found"
            lines = []
            for e in entries:
                if "error" in e:
                    lines.append(f"{e['name']}  (unavailable: {e['error']})  {e['path']}")
                    continue
                lines.append(f"{e['name']}  platform {e['platform']}  {e['path']}")
                lines.append(format_options(e["options"], indent="    "))
            return "\n".join(lines)

        self.output(entries, text)
        return 0
