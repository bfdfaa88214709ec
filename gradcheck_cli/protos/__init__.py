"""TensorFlow's graph protos, imported without the runtime, built into the graph model."""
