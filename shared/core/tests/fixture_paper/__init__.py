"""A minimal paper package used to test the core CLI (not shipped)."""

__version__ = "0.0.0"
