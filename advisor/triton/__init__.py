"""Triton: the client every caller uses, the embedded stand-in server, model-repository rendering, checks.

Importing this package loads no Triton library; tritonclient and pytriton are imported when first used.
"""
