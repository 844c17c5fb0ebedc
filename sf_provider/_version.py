"""The package's version, importable without the package root (which imports `provider`)."""

__version__ = "0.1.0"
