"""Performance harness for dex: `python -m bench` — see bench/run.py and RESULTS.md."""
