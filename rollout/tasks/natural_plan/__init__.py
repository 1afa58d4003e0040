"""Natural Plan (trip planning, meeting planning, calendar scheduling): the benchmark's
scoring rules, its data files, and generators of tasks in its format with gold PDDL."""
