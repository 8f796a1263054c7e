"""samu-schema."""
