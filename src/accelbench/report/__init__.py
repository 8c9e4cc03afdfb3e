"""Turning stored results into tables and files; nothing here imports torch."""
