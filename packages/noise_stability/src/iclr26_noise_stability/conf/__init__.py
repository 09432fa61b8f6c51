"""Hydra configs of iclr26-noise-stability (shipped in the wheel)."""
