"""Benchmarks of gradcheck against TensorFlow, and the synthetic graphs they use."""
