"""Keras models, `.keras` files and Keras exports, judged against TensorFlow's own gradients."""
