"""``python -m samu_schema``: the same as the ``samu-schema`` command."""

import sys

from samu_schema.cli import main

sys.exit(main())
