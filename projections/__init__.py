"""Read models: pure, versioned folds of the event log, kept in SQLite beside it."""
