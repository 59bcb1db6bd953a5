"""A toy engine observed by tests/observe."""
