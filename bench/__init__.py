"""The benchmarks and fault runs of Rollouts, grouped by what they measure: chaos/, nemesis/, performance/."""
