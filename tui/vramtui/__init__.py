"""vramtui: itemised GPU memory sizing, rented-card shortlist and OOM triage."""

__version__ = "0.1.0"
