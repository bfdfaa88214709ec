"""The user's source as gradcheck reads it: debug-info locations, expressions, notebook cells."""
