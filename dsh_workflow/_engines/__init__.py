"""Engine implementations behind the seam (private)."""
