"""The SQLite backend: the log is events.db in the home."""
