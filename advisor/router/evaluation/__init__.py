"""Offline evaluation on held-out prompts: every policy's realised cost and quality, summary figures and their
tables."""
