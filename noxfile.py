"""Development sessions for the samu workspace, run on uv.

``nox`` runs the defaults (lint, typecheck, tests); ``nox -s gpu_tests`` and ``nox -s gpu_bench``
need a CUDA GPU. Every session installs exactly what ``uv.lock`` pins (``--frozen``).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone

import nox

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.reuse_existing_virtualenvs = True

PACKAGES = ("samu-schema", "samu-kernels", "samu-modules", "samu-bench")
BENCH_HISTORY = "packages/samu-bench/benchmarks/history"
GPU_TEST_WORKERS = 4
MAX_CPU_TEST_WORKERS = 8


def sync(session: nox.Session, *groups: str) -> None:
    """Install the locked workspace with ``groups`` into the session's virtualenv."""
    args = ["uv", "sync", "--frozen", "--no-default-groups"]
    for group in groups:
        args += ["--group", group]
    session.run_install(*args, env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location})


def cpu_test_workers() -> int:
    """pytest-xdist workers for the CPU tests: one per core this process may use, at most
    ``MAX_CPU_TEST_WORKERS`` (each worker holds ~1 GB: torch and the Triton interpreter)."""
    if hasattr(os, "sched_getaffinity"):
        usable = len(os.sched_getaffinity(0))
    else:
        usable = os.cpu_count() or 1
    return min(usable, MAX_CPU_TEST_WORKERS)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff lint and format check over the whole workspace."""
    sync(session, "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over every package's sources."""
    sync(session, "typecheck")
    session.run("mypy", *(f"packages/{name}/src" for name in PACKAGES))


@nox.session
def tests(session: nox.Session) -> None:
    """CPU tests of every package; Triton kernels run under the interpreter.

    One pytest-xdist worker per usable core (:func:`cpu_test_workers`), tests handed out by
    work stealing, since the interpreter's kernel tests take 0.1-40 s each. Positional
    arguments select packages, e.g. ``nox -s tests -- samu-schema``.
    """
    sync(session, "packages", "tests")
    selected = session.posargs or PACKAGES
    unknown = sorted(set(selected) - set(PACKAGES))
    if unknown:
        session.error(f"unknown package(s) {unknown}; expected some of {list(PACKAGES)}")
    env = {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    paths = [f"packages/{name}/tests" for name in selected]
    workers = ["-n", str(cpu_test_workers()), "--dist", "worksteal"]
    session.run("pytest", "-m", "not gpu", *workers, *paths, env=env)


@nox.session
def gpu_tests(session: nox.Session) -> None:
    """Tests marked ``gpu``: real shapes on a CUDA GPU (compiled Triton, torch.compile).

    Four pytest-xdist workers share the GPU, so that a cold Triton cache compiles four
    kernels at a time; positional arguments go to pytest (``nox -s gpu_tests -- -n 8``).
    """
    sync(session, "packages", "tests")
    paths = [f"packages/{name}/tests" for name in PACKAGES]
    session.run("pytest", "-m", "gpu", "-n", str(GPU_TEST_WORKERS), *paths, *session.posargs)


@nox.session
def gpu_bench(session: nox.Session) -> None:
    """Benchmarks on a CUDA GPU: the kernel table, then the pytest-benchmark step suite.

    The kernel table goes to ``kernels-<UTC time>.json`` where nox was invoked; positional
    arguments replace that for ``python -m samu_kernels.benchmark``
    (``nox -s gpu_bench -- --out mine.json --sweep``).

    Saves each run to the committed history and fails when a median regresses by more than
    10% against the latest saved run on the same machine.
    """
    sync(session, "packages", "tests")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    table = os.path.join(session.invoked_from, f"kernels-{stamp}.json")
    session.run("python", "-m", "samu_kernels.benchmark", *(session.posargs or ["--out", table]))
    history = os.path.join(session.invoked_from, BENCH_HISTORY)
    session.run(
        "pytest",
        "packages/samu-bench/benchmarks",
        f"--benchmark-storage=file://{history}",
        "--benchmark-autosave",
        "--benchmark-compare",
        "--benchmark-compare-fail=median:10%",
    )
