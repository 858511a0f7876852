"""Checkpoint interchange: the original's TF1 names, Hugging Face names, TF-Hub modules, and loading, saving and
converting weights in every format.

A checkpoint is located (locating.py) and read into arrays keyed by original TF1 name (reading.py); one strict
matcher (matching.py) maps them onto a model's variables (loading.py); writing.py writes any of the formats
(formats.py), and conversion.py chains the two.
"""
