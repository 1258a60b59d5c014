"""The PostgreSQL backend: the log in a schema of a server several hosts share."""
