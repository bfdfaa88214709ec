"""`gradcheck run`, in the worker: the script run as __main__ up to its first gradient request."""
