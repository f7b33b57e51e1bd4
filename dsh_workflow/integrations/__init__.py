"""Integrations with systems outside the project; each lives behind its own optional extra."""
