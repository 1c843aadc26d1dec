"""HTAM: Hierarchical Transition-Attended Memory for GPU kernel optimization."""

__version__ = "0.1.0"
