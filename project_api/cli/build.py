"""``project-api build DIR``: build a generated project."""

from __future__ import annotations

import argparse
from pathlib import Path

from project_api.api.project import GeneratedProject, parse_option_assignments
from project_api.cli.base import Subcommand, add_option_argument


def run_project_step(cmd: Subcommand, step: str, past: str) -> int:
    """Open the project in ``cmd.args.project_dir`` and run ``build`` or ``flash`` on it."""
    directory = Path(cmd.args.project_dir)
    with GeneratedProject.from_directory(directory, debug=cmd.verbosity >= 2) as project:
        if cmd.args.options:
            project.override(parse_option_assignments(cmd.args.options, project.project_options,
                                                      project.where))
        cmd.progress(f"{step}: {directory} (platform {project.platform_name}) ...")
        getattr(project, step)()
        seconds = cmd.elapsed()
        cmd.progress(f"{step}: done in {seconds:.1f} s")
        data = {"project_dir": str(directory.absolute()), "platform": project.platform_name,
                "step": step, "seconds": round(seconds, 3), "options": project.options}
    cmd.output(data, f"{past} {directory}")
    return 0


class BuildCommand(Subcommand):
    NAMES = ["build"]
    HELP = "Build a generated project."
    DESCRIPTION = (
        "Build a generated project with its template's build (e.g. make/cmake for the host "
        "template). The options it was generated with are reused; -o overrides them."
    )
    EPILOG = """\
examples:
  project-api build prj
  project-api build prj -o verbose=true -v
  project-api build prj --json"""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("project_dir", metavar="DIR", help="a project made by 'project-api generate'")
        add_option_argument(parser)

    def invoke(self) -> int:
        return run_project_step(self, "build", "built")
