"""project-api: generate, build, flash and drive microcontroller projects for compiled ML models.

The successor of microTVM's Project API, with no TVM dependency. See README.md.
"""

__version__ = "0.1.0"

# The TVM version string our client reports in ``server_info_query``; template servers written for
# microTVM v0.15 check it.
TVM_COMPAT_VERSION = "0.15.0"
