"""Hand-written examples in Natural Plan's data format, each with the accuracy the benchmark's
own evaluation gives it (worked out by hand from the scripts' rules)."""

from __future__ import annotations

TRIP_HEAD = "Here is the trip plan for visiting the 3 European cities for 7 days:\n\n"
TRIP_GOLD = (TRIP_HEAD + "**Day 1-3:** Arriving in Lisbon and visit Lisbon for 3 days.\n"
             "**Day 3:** Fly from Lisbon to Porto.\n**Day 3-4:** Visit Porto for 2 days.\n"
             "**Day 4:** Fly from Porto to Madrid.\n**Day 4-7:** Visit Madrid for 4 days.")


def trip(key: int, answer: str, num_cities: int = 3) -> tuple[str, dict]:
    return f"trip_planning_example_{key}", {
        "cities": "Lisbon**Porto**Madrid", "durations": "3**2**4", "num_cities": num_cities,
        "prompt_0shot": "(statement)", "prompt_5shot": "(five examples)", "golden_plan": TRIP_GOLD,
        "pred_5shot_pro": answer}


# (answer, right?) per rule of evaluate_trip_planning.py
TRIP_CASES = [
    (TRIP_GOLD, True),  # the gold answer itself
    # partial trip: the first two stays right, the third city missing -> wrong
    (TRIP_HEAD + "**Day 1-3:** Visit Lisbon.\n**Day 3:** Fly from Lisbon to Porto.\n**Day 3-4:** Visit Porto.", False),
    # a wrong stay length in the middle -> wrong
    (TRIP_HEAD + "**Day 1-2:** Lisbon.\n**Day 2:** Fly from Lisbon to Porto.\n**Day 2-4:** Porto.\n"
     "**Day 4:** Fly from Porto to Madrid.\n**Day 4-7:** Madrid.", False),
    # first plan wins: a right plan, then an alternative -> reading stops at day 7, right
    (TRIP_GOLD + "\n\nAlternatively:\n**Day 1-4:** Visit Madrid.\n**Day 4:** Fly from Madrid to Porto.\n"
     "**Day 4-5:** Porto.\n**Day 5:** Fly from Porto to Lisbon.\n**Day 5-7:** Lisbon.", True),
    # first plan wins the other way: a wrong plan, then the right one -> wrong
    (TRIP_HEAD + "**Day 1-4:** Visit Madrid.\n**Day 4:** Fly from Madrid to Porto.\n**Day 4-5:** Porto.\n"
     "**Day 5:** Fly from Porto to Lisbon.\n**Day 5-7:** Lisbon.\n\n" + TRIP_GOLD, False),
    # no "European cities for N days" line: nothing stops the reading, an extra stay after a
    # matching prefix still counts as right (only the first len(gold) stays are compared)
    ("**Day 1-3:** Lisbon.\n**Day 3:** Fly from Lisbon to Porto.\n**Day 3-4:** Porto.\n"
     "**Day 4:** Fly from Porto to Madrid.\n**Day 4-7:** Madrid.\n**Day 7:** Fly from Madrid to Rome.\n"
     "**Day 7-8:** Rome.", True),
    # spans but no flight line -> nothing parsed, wrong
    (TRIP_HEAD + "Day 1-3 Lisbon, Day 3-4 Porto, Day 4-7 Madrid", False),
    ("", False),
]

MEETING_SPEC = {
    "num_people": 2,
    "constraints": [["Hill", "9:00AM"], ["Ana", "Park", "9:30AM to 11:00AM", 30],
                    ["Bo", "Old Pier", "11:00AM to 1:00PM", 60]],
    "dist_matrix": {"Hill": {"Park": 10, "Old Pier": 20}, "Park": {"Hill": 10, "Old Pier": 15},
                    "Old Pier": {"Hill": 20, "Park": 15}},
}
MEETING_GOLD = ["You start at Hill at 9:00AM.", "You travel to Park in 10 minutes and arrive at 9:10AM.",
                "You wait until 9:30AM.", "You meet Ana for 30 minutes from 9:30AM to 10:00AM.",
                "You travel to Old Pier in 15 minutes and arrive at 10:15AM.", "You wait until 11:00AM.",
                "You meet Bo for 60 minutes from 11:00AM to 12:00PM."]


def meeting(key: int, answer: str, num_people: int = 2) -> tuple[str, dict]:
    return f"meeting_planning_example_{key}", {
        **MEETING_SPEC, "num_people": num_people, "prompt_0shot": "(statement)", "prompt_5shot": "(five examples)",
        "golden_plan": MEETING_GOLD, "pred_5shot_pro": answer}


_ANA = "You travel to Park in 10 minutes and arrive at 9:10AM. You wait until 9:30AM. " \
       "You meet Ana for 30 minutes from 9:30AM to 10:00AM. "
_BO = "You travel to Old Pier in 15 minutes and arrive at 10:15AM. You wait until 11:00AM. " \
      "You meet Bo for 60 minutes from 11:00AM to 12:00PM."
# (answer, right?) per rule of evaluate_meeting_planning.py (right: as many valid meetings as gold's 2)
MEETING_CASES = [
    ("SOLUTION: You start at Hill at 9:00AM. " + _ANA + _BO, True),
    # another schedule with two valid meetings (later waits) is right too: only the count is compared
    ("SOLUTION: You start at Hill at 9:00AM. You travel to Park in 10 minutes and arrive at 9:10AM. "
     "You wait until 9:45AM. You meet Ana for 30 minutes from 9:45AM to 10:15AM. "
     "You travel to Old Pier in 15 minutes and arrive at 10:30AM. You wait until 11:30AM. "
     "You meet Bo for 60 minutes from 11:30AM to 12:30PM.", True),
    # invalid meeting: Ana before her window opens (no wait) ends the replay at 0 -> wrong
    ("SOLUTION: You travel to Park in 10 minutes and arrive at 9:10AM. "
     "You meet Ana for 30 minutes from 9:10AM to 9:40AM. " + _BO, False),
    # invalid meeting: Bo met at the wrong place
    ("SOLUTION: " + _ANA + "You wait until 11:00AM. You meet Bo for 60 minutes from 11:00AM to 12:00PM.", False),
    # one meeting only -> 1 != 2
    ("SOLUTION: " + _ANA, False),
    # the same person twice ends the replay after the first meeting
    ("SOLUTION: " + _ANA + "You meet Ana for 30 minutes from 10:00AM to 10:30AM. " + _BO, False),
    # an unknown sentence ends the replay
    ("SOLUTION: " + _ANA + "You have lunch. " + _BO, False),
    # waiting backwards in time ends the replay
    ("SOLUTION: " + _ANA + "You wait until 9:00AM. " + _BO, False),
    # a place not in the matrix (the script itself would crash here) ends the replay
    ("SOLUTION: You travel to Moon in 5 minutes and arrive at 9:05AM. " + _ANA + _BO, False),
    # no "SOLUTION:" marker: the whole text is the plan
    (_ANA + _BO, True),
]

CAL_GOLD = "Here is the proposed time: Monday, 14:30 - 15:00 "


def calendar(key: int, answer: str, people: int = 2, days: int = 1) -> tuple[str, dict]:
    return f"calendar_scheduling_example_{key}", {
        "num_days": days, "num_people": people, "duration": 1, "prompt_0shot": "(statement)",
        "prompt_5shot": "(five examples)", "golden_plan": CAL_GOLD, "pred_5shot_pro": answer}


# (answer, right?) per rule of evaluate_calendar_scheduling.py
CALENDAR_CASES = [
    (CAL_GOLD, True),
    ("The meeting fits on Monday, 14:30 - 15:00 for everyone.", True),
    # the first match wins
    ("Monday, 9:00 - 9:30 is taken, so: Monday, 14:30 - 15:00", False),
    # only ':30' adds half an hour: 15:15 reads as 15:00 (right), 14:45 as 14:00 (wrong)
    ("Here is the proposed time: Monday, 14:30 - 15:15", True),
    ("Here is the proposed time: Monday, 14:45 - 15:00", False),
    ("Here is the proposed time: Tuesday, 14:30 - 15:00", False),
    ("I could not find a time.", False),
]
