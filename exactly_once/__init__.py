"""exactly_once."""
