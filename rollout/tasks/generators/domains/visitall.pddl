; Visitall, written for HALO's task generators: a robot walks a grid and must visit given cells.
(define (domain visitall-typed)
  (:requirements :strips :typing)
  (:types cell)
  (:predicates (at-robot ?c - cell) (visited ?c - cell) (connected ?from ?to - cell))
  (:action move
    :parameters (?from ?to - cell)
    :precondition (and (at-robot ?from) (connected ?from ?to))
    :effect (and (at-robot ?to) (visited ?to) (not (at-robot ?from)))))
