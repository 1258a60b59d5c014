"""What the groups share: the run harness, how commands start, a notification sink, and a CPU meter."""
