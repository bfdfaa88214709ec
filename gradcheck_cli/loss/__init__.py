"""Which loss: the name the user gave among a model's candidates, and its float-scalar check."""
