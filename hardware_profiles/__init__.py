"""Data only: one JSON file per card, calibrations/ and measurements/ (see README.md here)."""
