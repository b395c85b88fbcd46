"""``python -m project_api``: the same as the ``project-api`` command."""

import sys

from project_api.cli import main

if __name__ == "__main__":
    sys.exit(main())
