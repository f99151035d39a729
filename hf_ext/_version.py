"""The package version (its own module so that hf_ext.core can read it without importing every method)."""

__version__ = "0.1.0"
