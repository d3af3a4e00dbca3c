"""The study analyses analyze.py runs: one file per folder of results/, their shared code and statistics."""
