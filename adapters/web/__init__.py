"""`rollouts serve`: a read-only web page, a JSON API and Prometheus metrics over the views."""
