"""Fitting the router from recorded runs (per-rung calibrated P(usable)), the tf-idf baseline, and the default rule
chosen in cross-validation."""
