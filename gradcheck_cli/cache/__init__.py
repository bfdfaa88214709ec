"""A script's or Keras file's trace reused while nothing it read has changed."""
