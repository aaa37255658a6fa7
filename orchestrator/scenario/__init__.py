"""coopsim package."""
