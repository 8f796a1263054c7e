"""samu-modules."""
