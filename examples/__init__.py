"""Runnable example jobs."""
