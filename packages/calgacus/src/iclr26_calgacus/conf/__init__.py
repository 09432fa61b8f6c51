"""Hydra configs of iclr26-calgacus (a package so that they ship in the wheel)."""
