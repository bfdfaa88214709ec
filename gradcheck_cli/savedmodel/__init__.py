"""A SavedModel read from its protos alone: no TensorFlow runtime, no variable values."""
