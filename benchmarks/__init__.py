"""The dsh-workflow benchmark suite: ``python -m benchmarks --help`` (see README.md here)."""
