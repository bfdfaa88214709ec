"""With TensorFlow, in the worker (or in process): scripts, Keras models and losses traced."""
