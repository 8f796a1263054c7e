"""samu-kernels."""
