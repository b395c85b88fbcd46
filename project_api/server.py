"""The TVM-compatible import line of a template server, ``from project_api import server``
(microTVM's ``from tvm.micro.project_api import server``): the very module
:mod:`project_api.api.server`, under its old name."""

import sys

from project_api.api import server as _module

sys.modules[__name__] = _module
