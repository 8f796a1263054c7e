"""The environment block of a result file: software, hardware and code revision."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

import samu_kernels
from samu_kernels.benchmark import REVISION_VARIABLE

SAMU_PACKAGES = ("samu-schema", "samu-kernels", "samu-modules", "samu-bench")


def _command_output(command: list[str], cwd: Path | None = None) -> str | None:
    """Stripped stdout of `command`, or None when it is missing, fails or hangs."""
    if shutil.which(command[0]) is None:
        return None
    try:
        completed = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return completed.stdout.strip() or None


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_revision(directory: Path) -> str | None:
    """The code's revision: the environment variable `SAMU_GIT_REVISION` when set (it
    overrides git), else the commit checked out in the working tree holding `directory`
    (`-dirty` if modified), else None (no git, or not a working tree).
    """
    named = os.environ.get(REVISION_VARIABLE)
    if named:
        return named
    commit = _command_output(["git", "rev-parse", "HEAD"], cwd=directory)
    if commit is None:
        return None
    changes = _command_output(["git", "status", "--porcelain", "--untracked-files=no"], directory)
    return f"{commit}-dirty" if changes else commit


def nvidia_driver() -> str | None:
    """The NVIDIA driver version from `nvidia-smi`, None without it."""
    output = _command_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return output.splitlines()[0].strip() if output else None


def collect_environment(device: torch.device) -> dict[str, Any]:
    """The environment block for a run on `device`.

    Records torch, CUDA, GPU name, triton, driver, python, platform, device kind
    ("cuda" or "cpu"), the git revision of the code's working tree, the samu package
    versions, whether the scan kernels use flush-to-zero transcendentals
    (`SAMU_KERNELS_FAST_MATH`) and whether they take bf16 gate sigmoids from `tanh.approx`
    (`SAMU_KERNELS_TANH_SIGMOID`); each is null where it cannot be known (gpu and cuda on a CPU
    run).
    """
    on_cuda = device.type == "cuda"
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda if on_cuda else None,
        "gpu": torch.cuda.get_device_name(device) if on_cuda else None,
        "device": "cuda" if on_cuda else "cpu",
        "triton": _package_version("triton"),
        "driver": nvidia_driver() if on_cuda else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "git_revision": git_revision(Path(__file__).resolve().parent),
        "samu_packages": {name: _package_version(name) for name in SAMU_PACKAGES},
        "samu_kernels_fast_math": samu_kernels.FAST_MATH_ENABLED,
        "samu_kernels_tanh_sigmoid": samu_kernels.TANH_SIGMOID_ENABLED,
    }
