"""The tools built on the wire and the archive: validate (and its per-layer view), analyze,
profile, mlperftiny, the farm of places that share one validation, the pictures and the demo."""
