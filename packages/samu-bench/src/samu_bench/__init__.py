"""samu-bench."""
