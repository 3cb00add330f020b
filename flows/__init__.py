"""Example flows the `dex` CLI runs by name (`dex run polling`)."""
