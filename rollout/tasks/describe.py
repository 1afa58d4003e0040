"""Natural-language descriptions generated from PDDL, for IPC-style tasks that ship none."""

from __future__ import annotations

from rollout.pddl.printer import to_text
from rollout.pddl.sections import section, sections, typed_list
from rollout.pddl.sexpr import SExpr, parse


def _fmt_atom(atom: SExpr) -> str:
    if isinstance(atom, str):
        return atom
    if atom and atom[0] == "not" and len(atom) == 2:
        return f"not {_fmt_atom(atom[1])}"
    if atom and atom[0] in ("at", "over") and len(atom) == 3 and isinstance(atom[1], str) \
            and atom[1] in ("start", "end", "all"):
        return f"{_fmt_atom(atom[2])} ({atom[0]} {atom[1]})"
    if atom and atom[0] == "and":
        return ", ".join(_fmt_atom(a) for a in atom[1:])
    if atom and all(isinstance(a, str) for a in atom):
        name, *args = atom
        return f"{name}({', '.join(args)})" if args else str(name)
    return to_text(atom)


def describe_domain(domain_text: str) -> str:
    define = parse(domain_text)
    lines: list[str] = []
    name = section(define, "domain")
    lines.append(f"Domain '{name[1] if name and len(name) > 1 else 'unnamed'}'.")
    types = section(define, ":types")
    if types and len(types) > 1:
        pairs = typed_list(types[1:])
        lines.append("Types: " + "; ".join(f"{t} is a kind of {p}" if p != "object" else t for t, p in pairs) + ".")
    preds = section(define, ":predicates")
    if preds:
        lines.append("Facts that can hold: " + ", ".join(_fmt_atom(p[:1] + [v for v, _ in typed_list(p[1:])])
                                                        for p in preds[1:] if isinstance(p, list)) + ".")
    for action in sections(define, ":action") + sections(define, ":durative-action"):
        act_name = action[1] if len(action) > 1 else "?"
        fields = {action[i]: action[i + 1] for i in range(2, len(action) - 1)
                  if isinstance(action[i], str) and action[i].startswith(":")}
        params = fields.get(":parameters", [])
        plist = ", ".join(f"{v} ({t})" if t != "object" else v
                          for v, t in typed_list(params if isinstance(params, list) else []))
        pre = fields.get(":precondition", fields.get(":condition", []))
        eff = fields.get(":effect", [])
        text = f"Action {act_name}({plist})"
        if ":duration" in fields:
            text += f" takes {to_text(fields[':duration'])}"
        text += f": requires {_fmt_atom(pre) or 'nothing'}; results in {_fmt_atom(eff) or 'nothing'}."
        lines.append(text)
    return "\n".join(lines)


def describe_problem(problem_text: str) -> str:
    define = parse(problem_text)
    lines: list[str] = []
    objs = section(define, ":objects")
    if objs:
        lines.append("Objects: " + ", ".join(f"{o} ({t})" if t != "object" else o
                                             for o, t in typed_list(objs[1:])) + ".")
    init = section(define, ":init")
    if init:
        lines.append("Initially: " + ", ".join(_fmt_atom(a) for a in init[1:]) + ".")
    goal = section(define, ":goal")
    if goal and len(goal) > 1:
        lines.append("Goal: " + _fmt_atom(goal[1]) + ".")
    return "\n".join(lines)


def describe(domain_text: str, problem_text: str) -> str:
    return describe_domain(domain_text) + "\n\n" + describe_problem(problem_text)
