"""Natural Plan's answer scoring, rule for rule as the benchmark's three evaluation scripts
(google-deepmind/natural-plan: evaluate_trip_planning.py, evaluate_meeting_planning.py,
evaluate_calendar_scheduling.py). Written here from reading them; the rules, in words:

Trip planning (exact match on the city sequence and stay lengths):
- the answer is read line by line; "European cities for N days" on a line sets the trip length;
- the first "A-B" day span on a line is recorded, and reading stops at the span that ends on
  the trip length (so a second, alternative plan after it is ignored: the first plan wins);
- every line matching ".*Day N ... from X to Y" is a flight (X, Y single words); the visited
  cities are the first flight's origin then every flight's destination; stay i lasts
  flight_day[i+1] - flight_day[i] + 1 days with flight days [1, flights..., end of last span];
- no span, no flight: nothing parsed (wrong); the answer is right when its first
  len(gold cities) stays equal the gold ones in order (a longer answer whose prefix matches
  counts as right; a shorter one never does).

Meeting planning (number of valid meetings equals the gold plan's):
- the prediction is the text after "SOLUTION:" (when present) cut at every '.', the gold plan
  a list of sentences; sentences are replayed from the start location and time:
  "You start" is skipped, "You travel to L in" adds the travel time from the matrix,
  "You wait until T" must move time forward, "You meet P for" starts now, lasts P's minimum
  and is valid when at P's location, inside P's window, and P was not met before;
  anything else, or an invalid step, ends the replay; the score is the valid meetings so far.
- Where the script would crash (a place missing from the matrix, a person not in the
  constraints, a sentence without the expected words) the replay ends there instead.

Calendar scheduling (exact match on day, start and end):
- the first "Day, H:MM - H:MM" in the text is the answer; a time is its hour plus 0.5 when
  the minutes are "30" (other minutes count as :00); no match reads as ('', -1, -1), so two
  unreadable texts are equal.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from typing import Any

from solvers.errors import InputError

_TRIP_LENGTH = re.compile(r"European cities for (\d+) days")
_DAY_SPAN = re.compile(r"\d+-\d+")
_FLIGHT = re.compile(r".*Day (\d+).*from (\w+) to (\w+)")
_PROPOSED_TIME = re.compile(r"[A-Za-z]+, [0-9]+:[0-9]+ - [0-9]+:[0-9]+")


class AnswerFormatError(InputError, ValueError):
    """An example whose gold fields are not in the benchmark's format."""


# ------------------------------------------------------------------ trip planning

def parse_trip_answer(text: str) -> list[tuple[str, int]]:
    """(city, days) in visiting order, read the way the benchmark reads a trip answer."""
    trip_length: int | None = None
    spans: list[str] = []
    flights: list[tuple[str, str, str]] = []
    for line in text.split("\n"):
        length = _TRIP_LENGTH.findall(line)
        if length:
            trip_length = int(length[0])
        span = _DAY_SPAN.findall(line)
        if span:
            spans.append(span[0])
            if int(span[0].split("-")[1]) == trip_length:
                break
        flight = _FLIGHT.findall(line)
        if flight:
            flights.append(flight[0])
    if not spans or not flights:
        return []
    cities = [flights[0][1]] + [dest for _, _, dest in flights]
    days = [1] + [int(day) for day, _, _ in flights] + [int(spans[-1].split("-")[1])]
    return [(city, days[i + 1] - days[i] + 1) for i, city in enumerate(cities)]


def score_trip(cities: str, durations: str, answer: str) -> bool:
    gold_cities = [c for c in cities.split("**") if c]
    try:
        gold_days = [int(d) for d in durations.split("**") if d]
    except ValueError as exc:
        raise AnswerFormatError(f"durations {durations!r} are not '**'-separated integers") from exc
    if not gold_cities or len(gold_cities) != len(gold_days):
        raise AnswerFormatError(f"cities {cities!r} and durations {durations!r} do not pair up")
    parsed = parse_trip_answer(answer)
    if len(parsed) < len(gold_cities):
        return False
    return all(parsed[i] == (gold_cities[i], gold_days[i]) for i in range(len(gold_cities)))


# ------------------------------------------------------------------ meeting planning

def clock(text: str) -> datetime.datetime:
    """'9:07AM' -> a datetime on the strptime default date (ValueError when not that form)."""
    return datetime.datetime.strptime(text.strip(), "%I:%M%p")


def meeting_sentences(plan: str | Sequence[str]) -> list[str]:
    """A gold plan is a list of sentences; a predicted one is text cut at every '.'."""
    if not isinstance(plan, str):
        return [str(s) for s in plan]
    marker = "SOLUTION:"
    if marker in plan:
        plan = plan[plan.find(marker) + len(marker):].strip()
    return [s.strip() for s in plan.split(".") if s.strip()]


class _Replay:
    """The walk through a meeting plan: where and when we are, and whom we met."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        start = spec["constraints"][0]
        self.place, self.now = str(start[0]), clock(str(start[1]))
        self.people = {}
        for name, location, window, minutes in spec["constraints"][1:]:
            begin, _, end = str(window).partition("to")
            self.people[str(name)] = (str(location), clock(begin), clock(end), int(minutes))
        self.travel = spec["dist_matrix"]
        self.met: set[str] = set()

    def step(self, sentence: str) -> bool:
        """Apply one sentence; True: a valid meeting; raises ValueError/KeyError/IndexError to stop."""
        if sentence.startswith("You start"):
            return False
        if sentence.startswith("You travel"):
            destination = sentence.split("travel to ")[1].split(" in")[0].strip()
            self.now += datetime.timedelta(minutes=self.travel[self.place][destination])
            self.place = destination
            return False
        if sentence.startswith("You wait"):
            until = clock(sentence.split("wait until ")[1].split(".")[0])
            if until <= self.now:
                raise ValueError("waiting cannot go back in time")
            self.now = until
            return False
        if sentence.startswith("You meet"):
            person = sentence.split("meet ")[1].split(" for")[0].strip()
            if person in self.met:
                raise ValueError(f"{person} met twice")
            self.met.add(person)
            location, begin, end, minutes = self.people[person]
            finish = self.now + datetime.timedelta(minutes=minutes)
            if self.place != location or self.now < begin or finish > end:
                raise ValueError(f"meeting {person} at the wrong place or time")
            self.now = finish
            return True
        raise ValueError("not a sentence of the plan format")


def count_valid_meetings(spec: Mapping[str, Any], plan: str | Sequence[str]) -> int:
    replay = _Replay(spec)
    score = 0
    for sentence in meeting_sentences(plan):
        try:
            score += replay.step(sentence)
        except (ValueError, KeyError, IndexError, TypeError):
            break
    return score


def check_meeting_spec(spec: Mapping[str, Any]) -> None:
    """Raise AnswerFormatError unless constraints and dist_matrix have the benchmark's shape."""
    try:
        _Replay(spec)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise AnswerFormatError(f"constraints/dist_matrix not in the benchmark's format ({exc})") from exc
    if not isinstance(spec["dist_matrix"], Mapping):
        raise AnswerFormatError("dist_matrix is not an object")


def score_meeting(spec: Mapping[str, Any], answer: str, golden_plan: str | Sequence[str]) -> bool:
    return count_valid_meetings(spec, answer) == count_valid_meetings(spec, golden_plan)


# ------------------------------------------------------------------ calendar scheduling

def _hour(text: str) -> float:
    hours, minutes = text.split(":")
    return float(hours) + (0.5 if minutes == "30" else 0.0)


def parse_proposed_time(text: str) -> tuple[str, float, float]:
    found = _PROPOSED_TIME.findall(text)
    if not found:
        return "", -1.0, -1.0
    day, hours = (part.strip() for part in found[0].split(",", 1))
    begin, end = (part.strip() for part in hours.split("-"))
    return day, _hour(begin), _hour(end)


def score_calendar(answer: str, golden_plan: str) -> bool:
    return parse_proposed_time(answer) == parse_proposed_time(golden_plan)
