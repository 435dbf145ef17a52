"""Adjunct data stores: read-only local caches that Samsa keeps current from CDC and broadcast streams."""
