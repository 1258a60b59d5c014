"""The built-in analysis providers (DESIGN 7.9): Prometheus and HTTP asked through urllib3, a command run
with the exit rule of 7.6, and the measurement process that runs a resolved template and decides its outcome."""
