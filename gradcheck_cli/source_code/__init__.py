"""The user's files as gradcheck reads them: debug-info locations, source lines, expressions,
notebook cells, a Keras archive's members."""
