"""accelbench's version: recorded with every run and fingerprint, and shown on reports."""

__version__ = "0.1.0"
