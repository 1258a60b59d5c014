"""The imperative shell: storage, the CLI, the controller and the runtimes."""
