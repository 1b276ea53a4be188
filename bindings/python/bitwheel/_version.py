"""The package's version: configure.ac's, written by make
python-generated (bindings/python/local.mk)."""

__version__ = "0.2.0"
