"""``project-api flash DIR``: flash a built project onto its device."""

from __future__ import annotations

import argparse

from project_api.cli.base import Subcommand, add_option_argument
from project_api.cli.build import run_project_step


class FlashCommand(Subcommand):
    NAMES = ["flash"]
    HELP = "Flash a built project onto its device."
    DESCRIPTION = (
        "Flash a built project onto its device with the template's flash step (a no-op for the "
        "host template, whose device is a process started when a session opens)."
    )
    EPILOG = """\
examples:
  project-api flash prj
  project-api flash prj -o serial_number=0672FF...   # options depend on the template
  project-api flash prj --json"""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("project_dir", metavar="DIR", help="a project built with 'project-api build'")
        add_option_argument(parser)

    def invoke(self) -> int:
        return run_project_step(self, "flash", "flashed")
