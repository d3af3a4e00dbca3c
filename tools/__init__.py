"""Scripts nothing imports (run from the project root: python tools/NAME.py), and the machinery sweep.sh sources."""
