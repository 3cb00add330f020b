"""Performance harness for dex (issue 6): `python -m bench` — see bench/run.py and RESULTS.md."""
