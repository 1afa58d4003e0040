; Floortile, written for HALO: robots paint the tiles of a grid. A robot paints the tile just
; above or just below the one it stands on, in the colour it holds, and may not step onto a
; painted tile, so the order of the work matters (a badly ordered plan walls a robot in).
(define (domain floortile)
  (:requirements :strips :typing)
  (:types robot tile color)
  (:predicates
    (robot-at ?r - robot ?t - tile)
    (up ?a - tile ?b - tile)        ; ?a is just above ?b
    (down ?a - tile ?b - tile)      ; ?a is just below ?b
    (right ?a - tile ?b - tile)     ; ?a is just right of ?b
    (left ?a - tile ?b - tile)      ; ?a is just left of ?b
    (clear ?t - tile)
    (painted ?t - tile ?c - color)
    (robot-has ?r - robot ?c - color)
    (available-color ?c - color))

  (:action change-color
    :parameters (?r - robot ?c - color ?c2 - color)
    :precondition (and (robot-has ?r ?c) (available-color ?c2))
    :effect (and (not (robot-has ?r ?c)) (robot-has ?r ?c2)))

  (:action paint-up
    :parameters (?r - robot ?a - tile ?b - tile ?c - color)
    :precondition (and (robot-has ?r ?c) (robot-at ?r ?b) (up ?a ?b) (clear ?a))
    :effect (and (not (clear ?a)) (painted ?a ?c)))

  (:action paint-down
    :parameters (?r - robot ?a - tile ?b - tile ?c - color)
    :precondition (and (robot-has ?r ?c) (robot-at ?r ?b) (down ?a ?b) (clear ?a))
    :effect (and (not (clear ?a)) (painted ?a ?c)))

  (:action move-up
    :parameters (?r - robot ?b - tile ?a - tile)
    :precondition (and (robot-at ?r ?b) (up ?a ?b) (clear ?a))
    :effect (and (robot-at ?r ?a) (not (robot-at ?r ?b)) (clear ?b) (not (clear ?a))))

  (:action move-down
    :parameters (?r - robot ?b - tile ?a - tile)
    :precondition (and (robot-at ?r ?b) (down ?a ?b) (clear ?a))
    :effect (and (robot-at ?r ?a) (not (robot-at ?r ?b)) (clear ?b) (not (clear ?a))))

  (:action move-right
    :parameters (?r - robot ?b - tile ?a - tile)
    :precondition (and (robot-at ?r ?b) (right ?a ?b) (clear ?a))
    :effect (and (robot-at ?r ?a) (not (robot-at ?r ?b)) (clear ?b) (not (clear ?a))))

  (:action move-left
    :parameters (?r - robot ?b - tile ?a - tile)
    :precondition (and (robot-at ?r ?b) (left ?a ?b) (clear ?a))
    :effect (and (robot-at ?r ?a) (not (robot-at ?r ?b)) (clear ?b) (not (clear ?a)))))
