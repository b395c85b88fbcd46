"""Model archives: reading a Model Library Format archive from any TVM release or from our
emitter, safely, with every fact it leaves out inferred.

- :mod:`~project_api.archive.mlf`: open an archive and describe its modules;
- :mod:`~project_api.archive.tvm_graph`: the graph executor's JSON and its parameters;
- :mod:`~project_api.archive.relay`: the Relay text a TVM archive carries (its ``def @main``);
- :mod:`~project_api.archive.crt_manifest`: which runtime libraries a module needs;
- :mod:`~project_api.archive.dtypes`: tensor element types by name.
"""
