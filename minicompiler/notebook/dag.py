"""The graph drawn as a DAG: inline SVG laid out in Python (no graphviz, no JavaScript).

The drawing is made from the printed graph in the report (so a saved report can be drawn
without the Graph object): each `name = ops.op(a, b)` line is a node with edges from `a`, `b`.
Layout is the classic layered one: a node's layer is its longest path from an input; nodes in
a layer are ordered by the mean position of their inputs, to keep edges short and uncrossed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Set
from dataclasses import dataclass, field

from minicompiler.notebook.markup import UNFUSED_COLOR, esc

BOX_WIDTH, BOX_HEIGHT, GAP_X, GAP_Y, MARGIN = 132, 40, 18, 34, 8
META_COMMENT = re.compile(r"#\s*(\w+\[[^\]]*\])")  # `# float32[4, 8]` after a node definition


@dataclass
class DagNode:
    name: str
    op: str  # "placeholder" and "output" for the graph's ends
    inputs: list[str]
    meta: str = ""
    layer: int = 0
    x: float = 0.0
    y: float = 0.0


@dataclass
class Dag:
    nodes: dict[str, DagNode] = field(default_factory=dict)

    @property
    def width(self) -> float:
        return max((n.x for n in self.nodes.values()), default=0) + BOX_WIDTH + 2 * MARGIN

    @property
    def height(self) -> float:
        return max((n.y for n in self.nodes.values()), default=0) + BOX_HEIGHT + 2 * MARGIN


def parse_graph(text: str) -> Dag | None:
    """The DAG of a printed graph (`def f(x: "f32[8]"): ... return y`); None if `text` is not one."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    functions = [s for s in tree.body if isinstance(s, ast.FunctionDef)]
    if len(functions) != 1:
        return None
    function, lines = functions[0], text.splitlines()
    dag = Dag()
    for arg in function.args.args:
        meta = arg.annotation.value if isinstance(arg.annotation, ast.Constant) else ""
        dag.nodes[arg.arg] = DagNode(arg.arg, "placeholder", [], str(meta))
    for statement in function.body:
        if isinstance(statement, ast.Return) and statement.value is not None:
            dag.nodes["output"] = DagNode("output", "output", _names_in(statement.value, dag))
        elif _is_node_definition(statement):
            target, call = statement.targets[0].id, statement.value
            match = META_COMMENT.search(lines[statement.lineno - 1])
            meta = match.group(1) if match else ""
            dag.nodes[target] = DagNode(target, call.func.attr, _names_in(call, dag), meta)
        else:
            return None
    return layout(dag)


def _is_node_definition(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name) and isinstance(statement.value, ast.Call)
            and isinstance(statement.value.func, ast.Attribute))


def _names_in(expression: ast.AST, dag: Dag) -> list[str]:
    """Earlier nodes an expression reads, in order, without repeats."""
    names = [n.id for n in ast.walk(expression) if isinstance(n, ast.Name) and n.id in dag.nodes]
    return list(dict.fromkeys(names))


def layout(dag: Dag) -> Dag:
    """Assign layers (longest path from an input) and positions within layers (mean of inputs)."""
    for node in dag.nodes.values():  # nodes are in execution order, so inputs come first
        node.layer = 1 + max((dag.nodes[i].layer for i in node.inputs), default=-1)
    layers: dict[int, list[DagNode]] = {}
    for node in dag.nodes.values():
        layers.setdefault(node.layer, []).append(node)
    slot = {}
    for depth in sorted(layers):
        row = layers[depth]
        first_seen = {n.name: i for i, n in enumerate(row)}
        row.sort(key=lambda n: _mean([slot[i] for i in n.inputs], default=first_seen[n.name]))
        # Centre rows on the widest one.
        offset = (max(len(r) for r in layers.values()) - len(row)) / 2
        for position, node in enumerate(row):
            slot[node.name] = position + offset
            node.x = MARGIN + (position + offset) * (BOX_WIDTH + GAP_X)
            node.y = MARGIN + depth * (BOX_HEIGHT + GAP_Y)
    return dag


def _mean(values: list[float], default: float) -> float:
    return sum(values) / len(values) if values else default


def dag_svg(dag: Dag, colors: dict[str, str] | None = None, highlighted: Set[str] = frozenset(),
            titles: dict[str, str] | None = None) -> str:
    """The DAG as inline SVG; `colors` fills nodes (e.g. by kernel), `highlighted` gets a thick border,
    `titles` become hover text."""
    colors, titles = colors or {}, titles or {}
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{dag.width:.0f}' height='{dag.height:.0f}' "
             f"font-family='ui-monospace, monospace' font-size='11'>"]
    for node in dag.nodes.values():
        for source in node.inputs:
            start = dag.nodes[source]
            x1, y1 = start.x + BOX_WIDTH / 2, start.y + BOX_HEIGHT
            x2, y2 = node.x + BOX_WIDTH / 2, node.y
            # An edge skipping layers bends sideways, around the boxes in between.
            bend = 0.7 * BOX_WIDTH if node.layer - start.layer > 1 else 0
            parts.append(f"<path d='M{x1:.0f},{y1:.0f} C{x1 + bend:.0f},{y1 + GAP_Y:.0f} {x2 + bend:.0f},"
                         f"{y2 - GAP_Y:.0f} {x2:.0f},{y2 - 4:.0f}' stroke='#888' fill='none'/>"
                         f"<circle cx='{x2:.0f}' cy='{y2 - 3:.0f}' r='2.5' fill='#888'/>")
    for node in dag.nodes.values():
        parts.append(_box(node, colors.get(node.name, _default_fill(node)), node.name in highlighted,
                          titles.get(node.name, "")))
    parts.append("</svg>")
    return f"<div style='overflow-x: auto'>{''.join(parts)}</div>"


def _default_fill(node: DagNode) -> str:
    return {"placeholder": "#e7f5ff", "output": "#fff"}.get(node.op, UNFUSED_COLOR)


def _box(node: DagNode, fill: str, highlighted: bool, title: str) -> str:
    border = "stroke='#d9480f' stroke-width='3'" if highlighted else "stroke='#495057' stroke-width='1'"
    label = node.name if node.op in ("placeholder", "output") else f"{node.name} = {node.op}"
    hover = esc(title or f"{label}  {node.meta}")
    cx = node.x + BOX_WIDTH / 2
    return (
        f"<g><title>{hover}</title>"
        f"<rect x='{node.x:.0f}' y='{node.y:.0f}' width='{BOX_WIDTH}' height='{BOX_HEIGHT}' rx='6' "
        f"fill='{fill}' {border}/>"
        f"<text x='{cx:.0f}' y='{node.y + 16:.0f}' text-anchor='middle' font-weight='bold'>"
        f"{esc(_clip(label))}</text>"
        f"<text x='{cx:.0f}' y='{node.y + 31:.0f}' text-anchor='middle' fill='#555'>"
        f"{esc(_clip(node.meta))}</text>"
        "</g>"
    )


def _clip(text: str, limit: int = 19) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
