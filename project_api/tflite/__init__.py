"""TFLite flatbuffers: the schema, a strict reader (what the emitter compiles) and a model
builder (what the tests and the demo make their models with)."""
