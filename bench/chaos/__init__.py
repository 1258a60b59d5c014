"""The chaos run (bench/chaos/run.py): real processes on one home, killed, corrupted and restored while commands run."""
