"""Derivatives of long-time averages of chaotic flows (least-squares shadowing)."""

from lyapax.shadowing.sensitivity import ShadowingResult, shadowing_sensitivity

__all__ = ["ShadowingResult", "shadowing_sensitivity"]
