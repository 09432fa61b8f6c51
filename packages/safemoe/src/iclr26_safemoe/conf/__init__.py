"""Hydra configs of iclr26-safemoe (a package so that they ship in the wheel)."""
