"""adjunct."""
