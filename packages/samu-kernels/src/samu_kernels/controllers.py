"""SAMU controllers: how the per-channel gate coordinates are computed."""

from __future__ import annotations

__all__ = [
    "CONTROLLERS",
    "DEFAULT_CONTROLLER",
    "FUSED_COORDS_CONTROLLER",
    "REFERENCE_CONTROLLER",
    "default_controller",
]

FUSED_COORDS_CONTROLLER = "fp32_fused_coords"
"""Coordinates and gates computed in fp32 inside the scan kernel (Triton backends)."""

REFERENCE_CONTROLLER = "reference"
"""Coordinates and gates computed in PyTorch; a Triton backend then runs the plain scan."""

CONTROLLERS: tuple[str, ...] = (FUSED_COORDS_CONTROLLER, REFERENCE_CONTROLLER)
DEFAULT_CONTROLLER = FUSED_COORDS_CONTROLLER


def default_controller(architecture: str) -> str | None:
    """The controller a scan of ``architecture`` runs with when none is given:
    ``DEFAULT_CONTROLLER`` for "samu", None for "rglru" (which takes none)."""
    return DEFAULT_CONTROLLER if architecture == "samu" else None
