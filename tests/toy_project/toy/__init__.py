"""A toy package whose gates and mutations exercise every verdict of the engine."""
