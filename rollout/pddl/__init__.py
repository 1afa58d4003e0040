"""PDDL text in the rollout layer: one reader, one printer, one model.

- `sexpr`: the only S-expression reader (iterative: any nesting depth) and tree copying.
- `printer`: trees back to text (`to_text` pretty, `unparse` one line).
- `sections`: the parts of a `(define ...)` (`section`, `sections`, `typed_list`).
- `model`: domain/problem structures read from text (`parse_domain`, `parse_problem`).
- `simulator`: a plan simulator over those structures (`World`, `simulate`, `load_world`).

The strict static check in `solvers/pddl_check.py` keeps its own lexer: it is in the bottom
layer, which cannot import this package, and it needs what this reader does not keep
(each token's line and column, a deadline, the translator's `?x` splitting).
"""
