"""``project_api.project``, the public path of a generated project: the very module
:mod:`project_api.api.project`, under its old name."""

import sys

from project_api.api import project as _module

sys.modules[__name__] = _module
