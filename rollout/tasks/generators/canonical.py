"""A canonical hash of a planning problem, the same under renaming of objects and under any
order of objects and facts, so isomorphic tasks are generated once.

The problem becomes a coloured graph: one vertex per object (coloured by its type), one per
fact (coloured by init/goal and predicate) and one per argument slot of facts with two or more
arguments (coloured by predicate and position). nauty's canonical labelling (pynauty) makes the
graph's certificate, which two problems share exactly when their graphs are isomorphic.
"""

from __future__ import annotations

import hashlib

import pynauty

from rollout.pddl.printer import to_text
from rollout.pddl.sections import section, typed_list
from rollout.pddl.sexpr import SExpr, parse
from rollout.tasks.generators.base import Atom

# Bumped when the same problem would hash differently (2: names case-folded). A set whose manifest
# names another version has its stored hashes recomputed before new tasks are checked against it.
HASH_VERSION = "2"


def canonical_hash(domain_name: str, objects: list[tuple[str, str]], init: list[Atom], goal: list[Atom],
                   constants: frozenset[str] = frozenset()) -> str:
    # PDDL names are case-insensitive
    domain_name = domain_name.lower()
    objects = [(n.lower(), t.lower()) for n, t in objects]
    init = [tuple(x.lower() for x in a) for a in init]
    goal = [tuple(x.lower() for x in a) for a in goal]
    constants = frozenset(c.lower() for c in constants)
    colour: list[str] = []
    index: dict[str, int] = {}
    edges: list[tuple[int, int]] = []

    def vertex(label: str) -> int:
        colour.append(label)
        return len(colour) - 1

    declared = {name for name, _ in objects}
    for name, typ in objects:
        index[name] = vertex(f"obj:{typ}")
    nullary: list[str] = []
    for part, atoms in (("init", init), ("goal", goal)):
        for atom in atoms:
            pred, args = atom[0], atom[1:]
            for a in args:  # a domain constant keeps its name: renaming it changes the task
                if a not in index:
                    index[a] = vertex(f"const:{a}" if a in constants or a not in declared else "obj:?")
            if not args:
                nullary.append(f"{part}:{pred}")
            elif len(args) == 1:
                edges.append((vertex(f"{part}:{pred}"), index[args[0]]))
            else:
                fact = vertex(f"{part}:{pred}")
                for pos, a in enumerate(args):
                    slot = vertex(f"{part}:{pred}#{pos}")
                    edges += [(fact, slot), (slot, index[a])]
    labels = sorted(set(colour))
    cells = [{v for v, c in enumerate(colour) if c == label} for label in labels]
    adjacency: dict[int, list[int]] = {}
    for a, b in edges:
        adjacency.setdefault(a, []).append(b)
    graph = pynauty.Graph(len(colour), directed=False, adjacency_dict=adjacency, vertex_coloring=cells)
    cert = pynauty.certificate(graph) if colour else b""
    head = "|".join([domain_name, *(f"{label}={len(cell)}" for label, cell in zip(labels, cells, strict=True)),
                     *sorted(nullary)])
    return hashlib.sha256(head.encode() + b"\0" + cert).hexdigest()


def _atoms(expr: SExpr) -> list[Atom]:
    """Positive ground atoms of an (and ...) conjunction or a single atom (case folded)."""
    if isinstance(expr, str) or not expr:
        return []
    if expr[0] == "and":
        return [a for part in expr[1:] for a in _atoms(part)]
    if all(isinstance(x, str) for x in expr):
        return [tuple(str(x).lower() for x in expr)]
    raise ValueError(f"only conjunctions of atoms are hashed, got {to_text(expr)[:80]}")


def hash_problem_text(problem_text: str) -> str:
    """canonical_hash of a problem's PDDL text (for tasks that did not come from a generator)."""
    define = parse(problem_text)
    domain = section(define, ":domain")
    objs = section(define, ":objects")
    init = section(define, ":init")
    goal = section(define, ":goal")
    objects = [(n.lower(), t.lower()) for n, t in typed_list(objs[1:])] if objs else []
    return canonical_hash(str(domain[1]).lower() if domain and len(domain) > 1 else "",
                          objects, [a for e in (init or [None])[1:] for a in _atoms(e)],
                          _atoms(goal[1]) if goal and len(goal) > 1 else [])
