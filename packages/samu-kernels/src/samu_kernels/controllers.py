"""SAMU controllers: how the per-channel gate coordinates are computed."""

from __future__ import annotations

__all__ = ["CONTROLLERS", "DEFAULT_CONTROLLER", "FUSED_COORDS_CONTROLLER", "REFERENCE_CONTROLLER"]

FUSED_COORDS_CONTROLLER = "fp32_fused_coords"
"""Coordinates and gates computed in fp32 inside the scan kernel (Triton backends)."""

REFERENCE_CONTROLLER = "reference"
"""Coordinates and gates computed in PyTorch; a Triton backend then runs the plain scan."""

CONTROLLERS: tuple[str, ...] = (FUSED_COORDS_CONTROLLER, REFERENCE_CONTROLLER)
DEFAULT_CONTROLLER = FUSED_COORDS_CONTROLLER
