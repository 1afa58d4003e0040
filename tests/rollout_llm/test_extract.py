"""Extraction of PDDL / outlines / instructions from free-form replies."""

from __future__ import annotations

import pytest

from rollout.agents.extract import ExtractionError, extract_pddl, extract_tagged_text

DOM = "(define (domain bw)\n  (:predicates (on ?x ?y))\n  (:action a :parameters (?x) :effect (on ?x ?x)))"
PROB = "(define (problem p1) (:domain bw) (:objects a) (:init) (:goal (on a a)))"


def test_tags_with_prose_around():
    reply = f"Here you go.\n<domain>\n{DOM}\n</domain>\nand\n<problem>{PROB}</problem>\nThanks!"
    got = extract_pddl(reply)
    assert got.domain == DOM and got.problem == PROB


def test_fenced_content_inside_tags_and_case_insensitive_tags():
    reply = f"<DOMAIN>\n```pddl\n{DOM}\n```\n</DOMAIN>\n<Problem>\n```\n{PROB}\n```\n</Problem>"
    got = extract_pddl(reply)
    assert got.domain == DOM and got.problem == PROB


def test_fenced_blocks_classified_by_define_head_not_order():
    reply = f"Problem first:\n```pddl\n{PROB}\n```\nThen the domain:\n```lisp\n{DOM}\n```\n"
    got = extract_pddl(reply)
    assert got.domain == DOM and got.problem == PROB


def test_swapped_tags_still_classified_by_content():
    got = extract_pddl(f"<domain>{PROB}</domain><problem>{DOM}</problem>")
    assert got.domain == DOM and got.problem == PROB


def test_bare_forms_in_prose_and_comments_with_parens():
    dom = "(define (domain bw) ; a comment with ( an open paren\n (:predicates (p)))"
    got = extract_pddl(f"Sure! {dom} and {PROB} done.")
    assert got.domain == dom and got.problem == PROB


def test_unclosed_tag_runs_to_end():
    got = extract_pddl(f"<domain>{DOM}</domain><problem>{PROB}")
    assert got.problem == PROB


def test_no_pddl_is_a_clear_error():
    with pytest.raises(ExtractionError, match="holds no domain and problem"):
        extract_pddl("I am sorry, I cannot help with that.")
    with pytest.raises(ExtractionError, match="empty"):
        extract_pddl("   ")


def test_unbalanced_parentheses_named():
    with pytest.raises(ExtractionError, match=r"domain in <domain> tag: unbalanced parentheses: 1"):
        extract_pddl(f"<domain>{DOM[:-1]}</domain><problem>{PROB}</problem>")


def test_partial_reply_allowed_only_when_not_required():
    got = extract_pddl(f"<problem>{PROB}</problem>", required=("problem",))
    assert got.domain is None and got.problem == PROB
    with pytest.raises(ExtractionError, match="holds no domain"):
        extract_pddl(f"<problem>{PROB}</problem>")


def test_tagged_text():
    assert extract_tagged_text("x <solution>\n1. a\n2. b\n</solution> y", "solution") == "1. a\n2. b"
    with pytest.raises(ExtractionError, match="no <instructions> section"):
        extract_tagged_text("1. do it", "instructions")
    with pytest.raises(ExtractionError, match="empty"):
        extract_tagged_text("<solution>  </solution>", "solution")
