"""``python -m samu_kernels.strip_probe``."""

from samu_kernels.strip_probe import main

raise SystemExit(main())
