"""``project_api.client``, the public path of the Project API client: the very module
:mod:`project_api.api.client`, under its old name."""

import sys

from project_api.api import client as _module

sys.modules[__name__] = _module
