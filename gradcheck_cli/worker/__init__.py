"""gradcheck's side of the worker process, without TensorFlow: start, talk to it, end its tree."""
