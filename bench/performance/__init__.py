"""The performance figures (bench/run.py runs them all): each beside a baseline measured in the same run."""
