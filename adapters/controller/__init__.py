"""The reconciler: a pure plan from desired and observed state, and the executor of that plan."""
