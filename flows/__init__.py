"""Example flows; flows/plugins.py makes them known to `dex` by name (`dex run polling`)."""
