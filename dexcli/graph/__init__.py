"""Definition graph, validation and lint of Dex flows: reads the SDK objects and the steps'
source, runs nothing. No typer, rich, engine or store imports here (the CLI renders)."""

from dexcli.graph.model import Edge, FlowGraph, Node, Problem, build_graph

__all__ = ["Edge", "FlowGraph", "Node", "Problem", "build_graph"]
