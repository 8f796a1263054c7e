"""Test setup for samu-modules.

- Triton kernels run under the interpreter when there is no GPU (set before samu_kernels
  defines its kernels).
- pytest runs with --import-mode=importlib, which puts no test directory on sys.path; this
  one is added so the tests can share `modules_testing` (a name unique in the workspace).
"""

import os
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, str(Path(__file__).parent))
