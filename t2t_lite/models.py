"""Placeholder; the model lands in this session."""
