"""Analyses over audit and run records. Each returns data (dataclasses); :mod:`tileprobe.report` renders it."""
