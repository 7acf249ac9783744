"""Importers of public formats: recorded per-prompt results (recorded.py) and Tessl-style scenario folders."""
