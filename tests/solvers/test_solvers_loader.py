"""What the sandbox binds for a program outside /usr, found by asking the loader (B1, B2 without
the real POPF and VAL: a program built here against a library reached through a symlink chain
that leaves /usr, as Debian's /etc/alternatives does)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import solvers
from solvers import loader
from solvers.results import PlanStep, plan_to_text


def test_link_chain_walks_every_symlink_to_the_file(tmp_path):
    (tmp_path / "real.so").write_text("")
    (tmp_path / "alt").symlink_to(tmp_path / "real.so")
    (tmp_path / "lib.so").symlink_to("alt")
    assert loader.link_chain(str(tmp_path / "lib.so")) == [str(tmp_path / n) for n in ("lib.so", "alt", "real.so")]


def test_b1_b2_a_program_with_its_library_behind_a_symlink_runs_in_the_sandbox(tmp_path, monkeypatch):
    if shutil.which("cc") is None:
        pytest.skip("no C compiler here to build the program")
    if solvers.sandbox_level() != "bwrap":
        pytest.skip("bubblewrap does not work here: nothing is bound, nothing to show")
    bin_dir, alt = tmp_path / "bin", tmp_path / "alternatives"
    bin_dir.mkdir()
    alt.mkdir()
    (tmp_path / "lib.c").write_text('#include <stdio.h>\nvoid hello(void) { puts("Plan valid"); }\n')
    (tmp_path / "main.c").write_text("void hello(void);\nint main(void) { hello(); return 0; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(alt / "libhello-real.so"), str(tmp_path / "lib.c")],
                   check=True)
    (bin_dir / "libhello.so").symlink_to(alt / "libhello-real.so")  # $ORIGIN -> a link out of the folder
    subprocess.run(["cc", "-o", str(bin_dir / "Validate"), str(tmp_path / "main.c"), f"-L{bin_dir}", "-lhello",
                    "-Wl,-rpath,$ORIGIN"], check=True)
    binds = [str(p) for p in loader.sandbox_binds(bin_dir / "Validate")]
    assert str(bin_dir) in binds and str(alt / "libhello-real.so") in binds
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    solvers.shutdown()
    try:
        result = solvers.pool.run([str(bin_dir / "Validate")])
    finally:
        solvers.shutdown()
    assert result.level == "bwrap" and result.returncode == 0, result.output
    assert "Plan valid" in result.output


def test_b9_plan_text_keeps_every_digit_of_a_duration():
    text = plan_to_text([PlanStep("a", (), 0.0, 1234.5678), PlanStep("b", (), 5.0015, 1234567.5),
                         PlanStep("c", (), 1.0, 5.0)])
    assert text == "0.000: (a) [1234.5678]\n5.0015: (b) [1234567.5]\n1.000: (c) [5]\n"
    domain = ("(define (domain wait) (:requirements :durative-actions :duration-inequalities)"
              " (:predicates (ready) (long)) (:durative-action b :parameters ()"
              " :duration (and (>= ?duration 1234567.4) (<= ?duration 1234567.6))"
              " :condition (at start (ready)) :effect (at end (long))))")
    problem = "(define (problem w) (:domain wait) (:init (ready)) (:goal (long)))"
    verdict = solvers.validate(domain, problem, plan_to_text([PlanStep("b", (), 0.0, 1234567.5)]),
                               validator="kairos")
    assert verdict.valid, verdict.to_dict()
