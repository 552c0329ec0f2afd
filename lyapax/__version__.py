"""The single definition of the lyapax version."""

__version__ = "0.4.0"
