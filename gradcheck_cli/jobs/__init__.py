"""The worker's own programs: one request's job run with TensorFlow, and the warm launcher."""
