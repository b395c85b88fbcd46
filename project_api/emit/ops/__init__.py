"""One module per operator; each exposes ``prepare(op, graph) -> Kernel`` (see ``common``)."""
