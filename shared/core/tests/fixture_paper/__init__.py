"""A minimal paper package used to test the core CLI (not shipped)."""
