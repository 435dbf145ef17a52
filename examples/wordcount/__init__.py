"""Word count: the quick-start job."""
